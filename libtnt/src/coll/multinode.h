/*
 * Collectives across nodes (num_nodes > 1). With UCX they are implemented in
 * the files in coll/multinode/ on top of transport/ucx/ (hierarchical: shm within the
 * node, UCX between nodes). Without UCX, coll/multinode_none.c makes
 * tnt_multinode_init fail with a message naming TNT_WITH_UCX.
 * coll/coll.c calls these only when comm->num_nodes > 1.
 */
#ifndef TNT_COLL_MULTINODE_H
#define TNT_COLL_MULTINODE_H

#include "comm/comm.h"

/* Collective over all ranks: connects every rank to the peers it needs on
 * other nodes (addresses exchanged through tnt_boot_allgather) and sets
 * comm->net. */
tnt_status_t tnt_multinode_init(tnt_comm_t *comm);
void tnt_multinode_finalize(tnt_comm_t *comm);

tnt_status_t tnt_multinode_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op);
/* The same for float16/bfloat16 data that must stay 16-bit on the wire (the
 * fusion engine's gradient compression): no float32 copy; the node's
 * shared-memory reduction sums all local ranks in float32 and rounds once,
 * and every hop between nodes combines two 16-bit partial sums in float32
 * and rounds once. Other dtypes: as tnt_multinode_allreduce. */
tnt_status_t tnt_multinode_allreduce_narrow(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op);
tnt_status_t tnt_multinode_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root);
tnt_status_t tnt_multinode_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes_per_rank);
tnt_status_t tnt_multinode_barrier(tnt_comm_t *comm);
/* The personalized collectives (coll/composed.c calls them with the
 * arguments checked and agreed on by every rank, core/api_composed.c):
 * each block crosses between nodes once, from its sender to the node of its
 * receiver, over the collectives' own UCX transport. In place as the public
 * calls allow it: gather's sendbuf may be the root's block of recvbuf,
 * scatter's recvbuf the root's block of sendbuf. alltoallv: blocks packed in
 * rank order, sendbytes this rank's row of all_send (rank r's row at
 * r * size). */
tnt_status_t tnt_multinode_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank, int root);
tnt_status_t tnt_multinode_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank, int root);
tnt_status_t tnt_multinode_alltoallv(tnt_comm_t *comm, const void *sendbuf,
                                     const size_t *sendbytes, void *recvbuf,
                                     const size_t *all_send);

/* The hang doctor's messages to ranks on other nodes (transport/ucx/ucx.h
 * side messages): send returns 0 or -1 (skipped), recv the length of one
 * queued message or 0, and the rank of this communicator that sent it
 * (messages without the communicator's cookie are dropped before). Without
 * UCX both do nothing. */
int tnt_multinode_side_send(tnt_comm_t *comm, int peer, const void *buf, size_t bytes);
size_t tnt_multinode_side_recv(tnt_comm_t *comm, void *buf, size_t bytes, int *sender_p);

#endif
