/*
 * Shared-memory transport and the single-node collectives built on it.
 * One segment per node, created by local rank 0 under a random name that it
 * sends to the others over the bootstrap (transport/shm_name.h), checked by
 * them before they map it (owner, mode, size, header), and unlinked as soon
 * as all local ranks have attached, so nothing stays in /dev/shm even after
 * kill -9. Large messages are pipelined through a bounded
 * staging area; each local rank reduces its own slice by reading its peers'
 * data directly, in a fixed order (local rank 0, 1, ...), so results are
 * bitwise identical everywhere. Waits back off and detect dead peers.
 */
#ifndef TNT_TRANSPORT_SHM_H
#define TNT_TRANSPORT_SHM_H

#include <tnt/tnt.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/shm_name.h"
#include "util/settings.h"
#include "util/slice.h"
#include "util/watch.h"

typedef struct tnt_shm tnt_shm_t;

/* What local rank 0 tells the node's other ranks over the bootstrap: the
 * segment's name and the sizes it was made with. The others open nothing
 * else and accept the segment only if it matches this exactly. */
typedef struct {
    char name[TNT_SHM_NAME_MAX];
    uint64_t segment_bytes;
    uint64_t slot_bytes;
    uint64_t small_max;
    int32_t local_size;
    /* TNT_OK, or why local rank 0 has no segment (it logged why); for
     * TNT_ERR_NO_MEMORY, segment_bytes and slot_bytes say what it needed. */
    int32_t status;
} tnt_shm_addr_t;

/* Collective over the node's ranks, called once by each inside
 * tnt_shm_create: local rank 0 passes its addr, every other rank receives
 * local rank 0's in addr. Returns TNT_OK, or an error it has raised. */
typedef tnt_status_t (*tnt_shm_exchange_fn)(void *arg, tnt_shm_addr_t *addr);

typedef struct {
    /* Local rank 0 names the segment "<name>-<random hex>"; libtnt passes
     * "/tnt-<pid>" (tnt_shm_name_prefix). */
    const char *name;
    int local_rank;
    int local_size;
    const int *global_ranks; /* local_size entries, for error messages */
    double timeout_s;        /* TNT_TIMEOUT */
    /* Local rank 0 takes the staging size (TNT_SHM_STAGING_KB) and the
     * one-phase allreduce limit (TNT_SHM_SMALL_KB; by layout: 512 KiB for
     * 2 local ranks, 128 up to 4, 16 above) from here and publishes them;
     * every rank takes TNT_SHM_CMA (single-copy process_vm_readv/writev
     * when all local ranks can use it: by default for the personalized
     * calls' mid-sized blocks only, see docs/tuning.md, "CMA"). Required. */
    const tnt_settings_t *settings;
    /* The hang doctor: polled from slow waits, and then it, not timeout_s,
     * decides when a wait fails (util/watch.h). NULL: timeout_s does. */
    tnt_watch_t *watch;
    /* How the name reaches the other local ranks (tnt_init: the bootstrap).
     * Required. */
    tnt_shm_exchange_fn exchange;
    void *exchange_arg;
    /* local_size pids from the bootstrap, by local rank: CMA reads and
     * writes only these processes, whatever the segment says. NULL (unit
     * tests without a bootstrap): the pids the ranks store in the segment. */
    const pid_t *pids;
    /* Bytes at the end of the segment for the layer above (the hang
     * doctor's board), zeroed; every local rank must pass the same. */
    size_t extra_bytes;
} tnt_shm_params_t;

/* Collective over the local ranks. */
tnt_status_t tnt_shm_create(const tnt_shm_params_t *params, tnt_shm_t **shm_p);
void tnt_shm_destroy(tnt_shm_t *shm);
/* The params' extra_bytes inside the segment (64-byte aligned). */
void *tnt_shm_extra(tnt_shm_t *shm);
/* 0 once local rank local_rank has died (its robust mutex in the segment
 * says so), 1 otherwise; a slow-path check, safe beside a collective. The
 * point-to-point transport asks it for its peers on this node, whose UCX
 * endpoints have no failure detection of their own (p2p/p2p.c). */
int tnt_shm_local_alive(tnt_shm_t *shm, int local_rank);
/* 1 when every local rank can read the others' memory with
 * process_vm_readv: the probe at create found it allowed for all, and
 * TNT_SHM_CMA is not off. The same on every local rank. */
int tnt_shm_cma_usable(const tnt_shm_t *shm);
/* Copies bytes at address remote in local rank local_rank's memory into
 * local with process_vm_readv (of the pid the bootstrap gave for that
 * rank); returns 0 or an errno (ESRCH: it has exited). Changes nothing
 * else, so the caller makes its own error; the point-to-point transport
 * reads large messages on a host so (p2p/p2p_ucx.c). */
int tnt_shm_read_local(tnt_shm_t *shm, int local_rank, void *local, uint64_t remote,
                       size_t bytes);

tnt_status_t tnt_shm_barrier(tnt_shm_t *shm);
/* TNT_AVG divides by local_size. */
tnt_status_t tnt_shm_allreduce(tnt_shm_t *shm, const void *sendbuf, void *recvbuf, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op);
/* The same, with every rank's contribution multiplied by its own scale first
 * (weighted sums for the fusion engine). The staged and small paths scale
 * while copying into shared memory, so the weighting costs no extra pass;
 * the result equals scaling in place and then calling tnt_shm_allreduce. */
tnt_status_t tnt_shm_allreduce_scaled(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                      size_t count, tnt_dtype_t dtype, tnt_op_t op, double scale);
tnt_status_t tnt_shm_broadcast(tnt_shm_t *shm, void *buf, size_t bytes, int root_local_rank);
tnt_status_t tnt_shm_allgather(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                               size_t bytes_per_rank);

/* The personalized collectives (shm_personalized.c): each rank copies only
 * the bytes addressed to it. Local ranks; gather/scatter's buffers hold
 * local_size blocks, local rank j's at j * bytes_per_rank; recvbuf (gather)
 * and sendbuf (scatter) matter on the root only. alltoallv: all_send is
 * every rank's send sizes, local rank r's row at r * local_size; blocks are
 * packed in rank order in sendbuf and recvbuf. */
/* Gather and reduce of at most TNT_SHM_EAGER_MAX bytes (per rank, and the
 * vector) return on the non-roots, and scatter (whose blocks fit one ring
 * entry) on the root, as soon as the data is in shared memory, up to
 * TNT_SHM_RING - 1 calls ahead of the receivers; the receivers check every
 * signature before they read. A difference reaches the senders in their
 * next call that waits: another collective on this segment, an eager call
 * that finds the ring full, or tnt_shm_settle (shm_impl.h, "Eager rooted
 * calls"). */
tnt_status_t tnt_shm_gather(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                            size_t bytes_per_rank, int root_local_rank);
tnt_status_t tnt_shm_scatter(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                             size_t bytes_per_rank, int root_local_rank);
tnt_status_t tnt_shm_alltoallv(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                               const size_t *all_send);

/* alltoallv whose sizes only each pair's sender and receiver know (on one
 * node, where the signature carries the rest of the agreement): its first
 * phase publishes every rank's sendbytes and recvbytes, and beside them
 * its small blocks whole (up to TNT_SHM_BLOCK_CMA_MIN; larger ones move
 * once the sizes have chosen between single and staged copies).
 * sized_start fills sizes (n x 2n words: rank r's sendbytes at r * 2n, its
 * recvbytes after them) from every rank; every rank then checks the pairs
 * alike, and only if they agree calls sized_finish with the send sizes
 * (all_send, n x n), before any other call on the segment. If they
 * disagree, nothing was read and the segment is in step. sized_fits:
 * whether the sizes fit one phase's slot beside the data (equal on every
 * local rank). */
int tnt_shm_alltoallv_sized_fits(const tnt_shm_t *shm);
tnt_status_t tnt_shm_alltoallv_sized_start(tnt_shm_t *shm, const void *sendbuf,
                                           const size_t *sendbytes, const size_t *recvbytes,
                                           uint64_t *sizes);
tnt_status_t tnt_shm_alltoallv_sized_finish(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                            const size_t *all_send);

/* Agreement on the caller's arguments, folded into the signature of the
 * first phase (core/api_composed.c: the collective set on one node).
 * terms_next: the next collective's signature also carries terms (a digest
 * of what this rank was asked to do; nonzero), which every local rank
 * compares like the rest; 0 takes it back. terms_only: a collective that
 * moves nothing, one phase whose signature carries count, terms and bad
 * (this rank's own checks failed), for calls with nothing to move and for
 * ranks that cannot run the collective (what names it in messages). After
 * a failure,
 * terms_differed is 1 when it was a signature mismatch in which every
 * local rank's signature carried terms: then every local rank failed at
 * the same phase, quietly (the caller names the difference), nothing was
 * read, and the segment is still in step. */
void tnt_shm_terms_next(tnt_shm_t *shm, uint64_t terms);
tnt_status_t tnt_shm_terms_only(tnt_shm_t *shm, const char *what, uint64_t count, int bad,
                                uint64_t terms);
int tnt_shm_terms_differed(const tnt_shm_t *shm);

/* Whether tnt_shm_reduce takes a vector of this many bytes (the rest go
 * through tnt_shm_allreduce). */
int tnt_shm_reduce_eager(const tnt_shm_t *shm, size_t bytes);
/* Whether tnt_shm_gather and tnt_shm_scatter with a valid root send blocks
 * of this many bytes through the eager ring (shm_impl.h, "Eager rooted
 * calls"), whose signature describes the call completely: terms set with
 * tnt_shm_terms_next would go unused. */
int tnt_shm_gather_eager(const tnt_shm_t *shm, size_t bytes_per_rank);
int tnt_shm_scatter_eager(const tnt_shm_t *shm, size_t bytes_per_rank);
/* The result on root_local_rank only, bitwise what tnt_shm_allreduce gives
 * there; the others return once their vector is in shared memory. */
tnt_status_t tnt_shm_reduce(tnt_shm_t *shm, const void *sendbuf, void *recvbuf, size_t count,
                            tnt_dtype_t dtype, tnt_op_t op, int root_local_rank);
/* Waits until every peer has reached each of this rank's eager sends not
 * checked yet, oldest first, and returns the verdict on their signatures
 * (TNT_OK when there were none): tnt_shm_begin does it, and finalize,
 * whose caller has no next call. */
tnt_status_t tnt_shm_settle(tnt_shm_t *shm);

/* Building blocks of the hierarchical allreduce. Slice i of a count-element
 * vector is tnt_slice(count, i, local_size) (util/slice.h).
 * reduce_scatter: afterwards recvbuf's own slice holds the node's reduction
 * (TNT_AVG divides by local_size; hierarchical callers pass TNT_SUM and
 * divide once at the end); other parts of recvbuf are left as they were,
 * and sendbuf == recvbuf is allowed. allgather_slices: each local rank contributes its
 * slice of buf; afterwards buf is complete on every local rank. */
tnt_status_t tnt_shm_reduce_scatter(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                    size_t count, tnt_dtype_t dtype, tnt_op_t op);
tnt_status_t tnt_shm_allgather_slices(tnt_shm_t *shm, void *buf, size_t count, tnt_dtype_t dtype);

#endif
