/*
 * The multi-node collectives of a build without UCX (-DTNT_WITH_UCX=OFF):
 * single-node jobs work as usual; a job that spans nodes fails in tnt_init
 * with a message that names the build option.
 */
#include "coll/multinode.h"

#include "util/log.h"

static tnt_status_t unsupported(tnt_comm_t *comm)
{
    return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                           "this job spans %d nodes but libtnt was built without UCX "
                           "(cmake -DTNT_WITH_UCX=ON, needs libucx-dev); rebuild it, or run "
                           "all ranks on one node",
                           comm->num_nodes);
}

tnt_status_t tnt_multinode_init(tnt_comm_t *comm)
{
    return unsupported(comm);
}

void tnt_multinode_finalize(tnt_comm_t *comm)
{
    (void)comm;
}

tnt_status_t tnt_multinode_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_allreduce_narrow(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes_per_rank)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_barrier(tnt_comm_t *comm)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank, int root)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank, int root)
{
    return unsupported(comm);
}

tnt_status_t tnt_multinode_alltoallv(tnt_comm_t *comm, const void *sendbuf,
                                     const size_t *sendbytes, void *recvbuf,
                                     const size_t *all_send)
{
    return unsupported(comm);
}

int tnt_multinode_side_send(tnt_comm_t *comm, int peer, const void *buf, size_t bytes)
{
    (void)comm;
    (void)peer;
    (void)buf;
    (void)bytes;
    return -1;
}

size_t tnt_multinode_side_recv(tnt_comm_t *comm, void *buf, size_t bytes, int *sender_p)
{
    (void)comm;
    (void)buf;
    (void)bytes;
    (void)sender_p;
    return 0;
}
