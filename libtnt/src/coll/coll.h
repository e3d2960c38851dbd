/*
 * Collective dispatch: picks the transport and algorithm for one collective.
 * Single node: the shared-memory algorithms in transport/shm*.c.
 * Several nodes: hierarchical schemes over shm + net (see coll/allreduce_*.c).
 * These run on whatever thread calls them (the caller for blocking
 * collectives, the progress thread for posted ones), never both at once.
 */
#ifndef TNT_COLL_COLL_H
#define TNT_COLL_COLL_H

#include "coll/doctor.h"
#include "comm/comm.h"

tnt_status_t tnt_coll_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op);
/* Allreduce of (scale x this rank's data): on one node the scale rides on the
 * shared-memory copy-in; across nodes recvbuf is scaled in place first.
 * sendbuf == recvbuf is the case the fusion engine uses. */
tnt_status_t tnt_coll_allreduce_scaled(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, tnt_dtype_t dtype, tnt_op_t op, double scale);
/* In-place allreduce of 16-bit data that stays 16-bit on the wire across
 * nodes too (tnt_multinode_allreduce_narrow); on one node it is
 * tnt_coll_allreduce, whose shared-memory kernels already keep 16 bits in
 * the segment and round once. The fusion engine's compressed buckets. */
tnt_status_t tnt_coll_allreduce_narrow(tnt_comm_t *comm, void *buf, size_t count,
                                       tnt_dtype_t dtype, tnt_op_t op);
tnt_status_t tnt_coll_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root);
tnt_status_t tnt_coll_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank);
tnt_status_t tnt_coll_barrier(tnt_comm_t *comm);

/* Around every collective: the next sequence number and the doctor's
 * enter (fails at once when an earlier collective broke the ranks' step),
 * then the doctor's leave and, for a failure part-way, the broken state;
 * while a timeline records, one event from begin to end with the name, the
 * bytes (this rank's whole message: the gathered result for a gather) and
 * comm->tl_algo, which an algorithm may set in between. */
tnt_status_t tnt_coll_begin(tnt_comm_t *comm, const char *name, tnt_doctor_kind_t kind,
                            uint64_t bytes);
tnt_status_t tnt_coll_end(tnt_comm_t *comm, const char *name, tnt_status_t status);
/* tnt_coll_end for a failure that every rank found alike at the same point,
 * with nothing exchanged: comm stays usable. */
tnt_status_t tnt_coll_end_in_step(tnt_comm_t *comm, const char *name, tnt_status_t status);

/* The collective set's agreement on one node (core/api_composed.c).
 * terms_fold: 1 when every collective of comm starts with a shared-memory
 * phase whose signature can carry a digest of the caller's arguments (one
 * node, several ranks), so that no round of its own is needed.
 * terms_next: the next collective carries terms (nonzero; 0 takes it
 * back). terms_only: a collective that moves nothing and only compares
 * count, bad (this rank's own checks failed) and terms, named name and
 * shown to the hang doctor as kind. terms_differed: the collective that
 * just failed found only a difference between terms-carrying signatures:
 * every rank failed alike at the same point, quietly, with nothing
 * exchanged, and comm is not broken; the caller names the difference. */
static inline int tnt_coll_terms_fold(const tnt_comm_t *comm)
{
    return comm->num_nodes == 1 && comm->size > 1 && comm->shm != NULL;
}
void tnt_coll_terms_next(tnt_comm_t *comm, uint64_t terms);
/* Whether, where tnt_coll_terms_fold, a gather or scatter of comm with a
 * valid root and bytes_per_rank (reduce: a vector of bytes) moves them
 * through the eager ring (transport/shm.h), whose signature describes the
 * call completely: terms would go unused, and the caller need not compute
 * them. */
int tnt_coll_gather_eager(const tnt_comm_t *comm, size_t bytes_per_rank);
int tnt_coll_scatter_eager(const tnt_comm_t *comm, size_t bytes_per_rank);
int tnt_coll_reduce_eager(const tnt_comm_t *comm, size_t bytes);
tnt_status_t tnt_coll_terms_only(tnt_comm_t *comm, const char *name, tnt_doctor_kind_t kind,
                                 uint64_t count, int bad, uint64_t terms);
int tnt_coll_terms_differed(const tnt_comm_t *comm);
/* Before the communicator goes: waits for the receivers of this rank's last
 * eager rooted call (transport/shm.h) and reports a difference they found,
 * which this rank would otherwise learn of in its next call. */
tnt_status_t tnt_coll_settle(tnt_comm_t *comm);

/* Composed from the three above (coll/composed.c); arguments already
 * checked and agreed on by every rank (core/api_composed.c). alltoallv's
 * all_sendbytes is every rank's sendbytes, rank r's row at r * size. */
tnt_status_t tnt_coll_reduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             tnt_dtype_t dtype, tnt_op_t op, int root);
tnt_status_t tnt_coll_reduce_scatterv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op);
tnt_status_t tnt_coll_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t bytes_per_rank, int root);
tnt_status_t tnt_coll_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t bytes_per_rank, int root);
tnt_status_t tnt_coll_allgatherv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 const size_t *recvbytes);
tnt_status_t tnt_coll_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                void *recvbuf, const size_t *all_sendbytes);

/* alltoallv's pairs: sizes holds every rank's sendbytes and recvbytes
 * (rank r's 2 size words at r * 2 size, sendbytes first). Fills all_send
 * (size x size) with the send sizes, or fails with TNT_ERR_MISMATCH naming
 * the first pair (in rank order) whose sender and receiver disagree, the
 * same on every rank; fn names the call. */
tnt_status_t tnt_coll_check_pairs(const tnt_comm_t *comm, const char *fn, const uint64_t *sizes,
                                  size_t *all_send);
/* alltoallv on one node with only this rank's sizes: the sizes travel in
 * the call's first shared-memory phase (transport/shm.h), and the pairs are
 * checked there, so that no round of agreement comes before it.
 * sizes_fits: whether comm can (one node, several ranks, sizes that fit a
 * slot). sizes (size x 2 size words) and all_send (size x size) are the
 * caller's scratch. A pair that disagrees fails every rank alike, with comm
 * still usable. */
int tnt_coll_alltoallv_sized_fits(const tnt_comm_t *comm);
tnt_status_t tnt_coll_alltoallv_sized(tnt_comm_t *comm, const char *fn, const void *sendbuf,
                                      const size_t *sendbytes, void *recvbuf,
                                      const size_t *recvbytes, uint64_t *sizes, size_t *all_send);

#endif
