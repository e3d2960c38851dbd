/*
 * Gather, scatter and alltoall(v) in one node's segment: every rank copies
 * only the bytes addressed to it, through the slots the other collectives
 * use (two per rank, one phase each, as in tnt_shm_allgather).
 *
 * gather     each rank publishes a chunk of its block; the root copies all
 * scatter    the root publishes a chunk for every rank side by side; each
 *            copies its own
 * alltoallv  every rank publishes, side by side, a chunk of each block it
 *            sends; each copies its own chunk out of every peer's slot
 * Each phase moves at most slot_bytes per rank, so any size pipelines
 * through the same bounded segment. Gather and scatter of at most
 * TNT_SHM_EAGER_MAX bytes per rank (scatter: all blocks within one ring
 * entry) are one eager phase: the non-roots of gather and the root of
 * scatter return as soon as their bytes are in their eager ring
 * (shm_impl.h, "Eager rooted calls"). From TNT_SHM_BLOCK_CMA_MIN
 * bytes per block, with CMA, each block is copied once instead: the ranks
 * publish their buffers, the receivers read their blocks straight out of
 * the senders' (process_vm_readv), and a second phase keeps the senders'
 * buffers untouched until every receiver has read.
 */
#include "transport/shm_impl.h"

#include "util/log.h"

#include <string.h>

/* A piece of a slot per destination: slot_bytes / n, kept 64-byte aligned
 * where it can be. */
static size_t piece_bytes(const struct tnt_shm *shm)
{
    size_t piece = shm->slot_bytes / (size_t)shm->n;
    return piece >= 64 ? piece / 64 * 64 : piece;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The bytes of a block of length total at offset off, at most piece. */
static size_t chunk(size_t total, size_t off, size_t piece)
{
    return total > off ? min_size(total - off, piece) : 0;
}

static tnt_status_t check_root(const struct tnt_shm *shm, int root, const char *what)
{
    if (root < 0 || root >= shm->n) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "rank %d: %s: bad root local rank %d",
                               shm->global_ranks[shm->me], what, root);
    }
    return TNT_OK;
}

/* The first phase has published every rank's buffers; the second keeps the
 * senders' intact until the receivers have read. */
static tnt_status_t gather_cma(struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                               size_t bytes_per_rank, int root)
{
    tnt_shm_publish(shm, sendbuf, NULL);
    tnt_status_t status = tnt_shm_phase(shm, "gather");
    for (int j = 0; status == TNT_OK && shm->me == root && j < shm->n; j++) {
        if (j != root) {
            status = tnt_shm_cma_read(shm, j, (char *)recvbuf + (size_t)j * bytes_per_rank,
                                      tnt_shm_peer_buf(shm, j, 0), bytes_per_rank, "gather");
        }
    }
    return status == TNT_OK ? tnt_shm_phase(shm, "gather") : status;
}

static tnt_status_t scatter_cma(struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, int root)
{
    tnt_shm_publish(shm, sendbuf, NULL);
    tnt_status_t status = tnt_shm_phase(shm, "scatter");
    if (status == TNT_OK && shm->me != root) {
        status = tnt_shm_cma_read(shm, root, recvbuf,
                                  tnt_shm_peer_buf(shm, root, 0) +
                                      (uint64_t)shm->me * bytes_per_rank,
                                  bytes_per_rank, "scatter");
    }
    return status == TNT_OK ? tnt_shm_phase(shm, "scatter") : status;
}

/* Every rank reads, from each peer r's sendbuf (published in the phase
 * just finished), the block r sends it: at the offset of r's blocks to the
 * ranks before it (all_send is agreed). Blocks of at most skip bytes have
 * moved already. A last phase keeps the senders' buffers untouched until
 * every receiver has read. */
static tnt_status_t alltoallv_cma_read(struct tnt_shm *shm, void *recvbuf, const size_t *all_send,
                                       size_t skip)
{
    const int n = shm->n, me = shm->me;
    tnt_status_t status = TNT_OK;
    size_t rdispl = 0;
    for (int r = 0; status == TNT_OK && r < n; r++) {
        const size_t *from = all_send + (size_t)r * (size_t)n;
        if (r != me && from[me] > skip) {
            uint64_t sdispl = 0;
            for (int j = 0; j < me; j++) {
                sdispl += from[j];
            }
            status = tnt_shm_cma_read(shm, r, (char *)recvbuf + rdispl,
                                      tnt_shm_peer_buf(shm, r, 0) + sdispl, from[me], "alltoall");
        }
        rdispl += from[me];
    }
    return status == TNT_OK ? tnt_shm_phase(shm, "alltoall") : status;
}

static tnt_status_t alltoallv_cma(struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                                  const size_t *all_send)
{
    tnt_shm_publish(shm, sendbuf, NULL);
    tnt_status_t status = tnt_shm_phase(shm, "alltoall");
    return status == TNT_OK ? alltoallv_cma_read(shm, recvbuf, all_send, 0) : status;
}

int tnt_shm_gather_eager(const tnt_shm_t *shm, size_t bytes_per_rank)
{
    return shm->n > 1 && bytes_per_rank > 0 && bytes_per_rank <= TNT_SHM_EAGER_MAX;
}

/* Every block in one ring entry, at its rank's place. */
int tnt_shm_scatter_eager(const tnt_shm_t *shm, size_t bytes_per_rank)
{
    return shm->n > 1 && bytes_per_rank > 0 && bytes_per_rank <= TNT_SHM_EAGER_MAX &&
           bytes_per_rank <= TNT_SHM_RING_DATA / (size_t)shm->n;
}

tnt_status_t tnt_shm_gather(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                            size_t bytes_per_rank, int root)
{
    const int eager = tnt_shm_gather_eager(shm, bytes_per_rank) && root >= 0 && root < shm->n;
    tnt_status_t status = tnt_shm_begin_settle(shm, !eager);
    if (status == TNT_OK) {
        status = check_root(shm, root, "gather");
    }
    if (status != TNT_OK || bytes_per_rank == 0) {
        return status;
    }
    if (shm->me == root) {
        char *own = (char *)recvbuf + (size_t)root * bytes_per_rank;
        if (own != sendbuf) {
            memmove(own, sendbuf, bytes_per_rank);
        }
    }
    if (shm->n == 1) {
        return TNT_OK;
    }
    if (eager) {
        const int sends = shm->me != root;
        unsigned char *data;
        status = tnt_shm_eager_claim(shm, TNT_SHM_KIND_GATHER, bytes_per_rank, 0, 0, root, sends,
                                     bytes_per_rank, "gather", &data);
        if (status != TNT_OK) {
            return status;
        }
        if (sends) {
            memcpy(data, sendbuf, bytes_per_rank);
        }
        if ((status = tnt_shm_eager_publish(shm, sends, "gather")) != TNT_OK || sends) {
            return status;
        }
        for (int j = 0; j < shm->n; j++) {
            if (j != root) {
                tnt_shm_ring_prefetch_read(shm, j, shm->phase + 1, bytes_per_rank, 0,
                                           bytes_per_rank);
                memcpy((char *)recvbuf + (size_t)j * bytes_per_rank,
                       tnt_shm_ring_data(shm, j, shm->phase, bytes_per_rank), bytes_per_rank);
            }
        }
        return TNT_OK;
    }
    tnt_shm_expect(shm, TNT_SHM_KIND_GATHER, bytes_per_rank, 0, (unsigned)root);
    if (tnt_shm_block_cma(shm, bytes_per_rank, 0)) {
        return gather_cma(shm, sendbuf, recvbuf, bytes_per_rank, root);
    }
    for (size_t done = 0; done < bytes_per_rank; done += shm->slot_bytes) {
        size_t len = min_size(bytes_per_rank - done, shm->slot_bytes);
        if (shm->me != root) {
            memcpy(tnt_shm_slot(shm, shm->me, shm->phase + 1), (const char *)sendbuf + done, len);
        }
        if ((status = tnt_shm_phase(shm, "gather")) != TNT_OK) {
            return status;
        }
        for (int j = 0; shm->me == root && j < shm->n; j++) {
            if (j != root) {
                memcpy((char *)recvbuf + (size_t)j * bytes_per_rank + done,
                       tnt_shm_slot(shm, j, shm->phase), len);
            }
        }
    }
    return TNT_OK;
}

tnt_status_t tnt_shm_scatter(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                             size_t bytes_per_rank, int root)
{
    const int eager = tnt_shm_scatter_eager(shm, bytes_per_rank) && root >= 0 && root < shm->n;
    tnt_status_t status = tnt_shm_begin_settle(shm, !eager);
    if (status == TNT_OK) {
        status = check_root(shm, root, "scatter");
    }
    if (status != TNT_OK || bytes_per_rank == 0) {
        return status;
    }
    if (shm->me == root) {
        const char *own = (const char *)sendbuf + (size_t)root * bytes_per_rank;
        if (own != recvbuf) {
            memmove(recvbuf, own, bytes_per_rank);
        }
    }
    if (shm->n == 1) {
        return TNT_OK;
    }
    if (eager) {
        const int sends = shm->me == root;
        unsigned char *data;
        const size_t all = (size_t)shm->n * bytes_per_rank;
        status = tnt_shm_eager_claim(shm, TNT_SHM_KIND_SCATTER, bytes_per_rank, 0, 0, root, sends,
                                     all, "scatter", &data);
        if (status != TNT_OK) {
            return status;
        }
        if (sends) {
            /* The blocks to the others, where each receiver reads its own
             * (index by rank); the root's own block is not written: every
             * line written here is one the receivers had read, and costs a
             * transfer back (2 ranks: half the lines). */
            const size_t own = (size_t)root * bytes_per_rank;
            memcpy(data, sendbuf, own);
            memcpy(data + own + bytes_per_rank, (const char *)sendbuf + own + bytes_per_rank,
                   all - own - bytes_per_rank);
        }
        if ((status = tnt_shm_eager_publish(shm, sends, "scatter")) != TNT_OK || sends) {
            return status;
        }
        /* The header line only: a receiver of a scatter, with one block to
         * copy against the root's n - 1, would take the data lines of the
         * next call from a root still writing them (docs/benchmarks.md,
         * "Taking ring lines early"). */
        tnt_shm_ring_prefetch_read(shm, root, shm->phase + 1, all, 0, 0);
        memcpy(recvbuf,
               tnt_shm_ring_data(shm, root, shm->phase, all) + (size_t)shm->me * bytes_per_rank,
               bytes_per_rank);
        return TNT_OK;
    }
    const size_t piece = piece_bytes(shm);
    tnt_shm_expect(shm, TNT_SHM_KIND_SCATTER, bytes_per_rank, 0, (unsigned)root);
    if (tnt_shm_block_cma(shm, bytes_per_rank, 0)) {
        return scatter_cma(shm, sendbuf, recvbuf, bytes_per_rank, root);
    }
    for (size_t done = 0; done < bytes_per_rank; done += piece) {
        size_t len = min_size(bytes_per_rank - done, piece);
        if (shm->me == root) {
            char *slot = tnt_shm_slot(shm, root, shm->phase + 1);
            for (int j = 0; j < shm->n; j++) {
                if (j != root) {
                    memcpy(slot + (size_t)j * piece,
                           (const char *)sendbuf + (size_t)j * bytes_per_rank + done, len);
                }
            }
        }
        if ((status = tnt_shm_phase(shm, "scatter")) != TNT_OK) {
            return status;
        }
        if (shm->me != root) {
            memcpy((char *)recvbuf + done,
                   tnt_shm_slot(shm, root, shm->phase) + (size_t)shm->me * piece, len);
        }
    }
    return TNT_OK;
}

/* Copies this rank's block to itself, which never leaves the rank, and
 * returns the largest block of all_send. */
static size_t alltoallv_own_block(const struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                                  const size_t *all_send)
{
    const int n = shm->n, me = shm->me;
    size_t largest = 0, sdispl_me = 0, rdispl_me = 0;
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < n; j++) {
            size_t b = all_send[(size_t)r * (size_t)n + (size_t)j];
            largest = b > largest ? b : largest;
        }
        sdispl_me += r < me ? all_send[(size_t)me * (size_t)n + (size_t)r] : 0;
        rdispl_me += r < me ? all_send[(size_t)r * (size_t)n + (size_t)me] : 0;
    }
    size_t own = all_send[(size_t)me * (size_t)n + (size_t)me];
    if (own > 0) {
        memmove((char *)recvbuf + rdispl_me, (const char *)sendbuf + sdispl_me, own);
    }
    return largest;
}

/* The staged exchange, one piece per block and phase, of every block of
 * more than skip bytes (the others have moved already). */
static tnt_status_t alltoallv_pieces(struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                                     const size_t *all_send, size_t largest, size_t skip)
{
    const int n = shm->n, me = shm->me;
    const size_t *mine = all_send + (size_t)me * (size_t)n;
    const size_t piece = piece_bytes(shm);
    for (size_t off = 0; off < largest; off += piece) {
        char *slot = tnt_shm_slot(shm, me, shm->phase + 1);
        size_t sdispl = 0;
        for (int j = 0; j < n; j++) {
            size_t len = chunk(mine[j], off, piece);
            if (j != me && mine[j] > skip && len > 0) {
                memcpy(slot + (size_t)j * piece, (const char *)sendbuf + sdispl + off, len);
            }
            sdispl += mine[j];
        }
        tnt_status_t status = tnt_shm_phase(shm, "alltoall");
        if (status != TNT_OK) {
            return status;
        }
        size_t rdispl = 0;
        for (int r = 0; r < n; r++) {
            size_t from_r = all_send[(size_t)r * (size_t)n + (size_t)me];
            size_t len = chunk(from_r, off, piece);
            if (r != me && from_r > skip && len > 0) {
                memcpy((char *)recvbuf + rdispl + off,
                       tnt_shm_slot(shm, r, shm->phase) + (size_t)me * piece, len);
            }
            rdispl += from_r;
        }
    }
    return TNT_OK;
}

tnt_status_t tnt_shm_alltoallv(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                               const size_t *all_send)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK) {
        return status;
    }
    size_t largest = alltoallv_own_block(shm, sendbuf, recvbuf, all_send);
    if (shm->n == 1 || largest == 0) {
        return TNT_OK;
    }
    tnt_shm_expect(shm, TNT_SHM_KIND_ALLTOALL, largest, 0, 0);
    if (tnt_shm_block_cma(shm, largest, 1)) {
        return alltoallv_cma(shm, sendbuf, recvbuf, all_send);
    }
    return alltoallv_pieces(shm, sendbuf, recvbuf, all_send, largest, 0);
}

/* ---- alltoallv whose sizes the call itself carries ----------------------- */

/* The sizes' part of the first phase's slot (2 n words, whole cache lines),
 * and the room per destination after it for the blocks that ride along. */
static size_t sized_header_bytes(const struct tnt_shm *shm)
{
    return (2 * sizeof(uint64_t) * (size_t)shm->n + 63) / 64 * 64;
}

static size_t sized_rider_stride(const struct tnt_shm *shm)
{
    size_t piece = (shm->slot_bytes - sized_header_bytes(shm)) / (size_t)shm->n;
    return piece >= 64 ? piece / 64 * 64 : piece;
}

/* Blocks of up to this many bytes travel whole with the sizes. Larger ones
 * wait for the sizes (which decide between single and staged copies), so
 * that no block is copied into the slot for nothing. */
static size_t sized_rider_max(const struct tnt_shm *shm)
{
    return min_size(sized_rider_stride(shm), TNT_SHM_BLOCK_CMA_MIN);
}

int tnt_shm_alltoallv_sized_fits(const tnt_shm_t *shm)
{
    return shm->n > 1 && sized_header_bytes(shm) + 64 * (size_t)shm->n <= shm->slot_bytes;
}

tnt_status_t tnt_shm_alltoallv_sized_start(tnt_shm_t *shm, const void *sendbuf,
                                           const size_t *sendbytes, const size_t *recvbytes,
                                           uint64_t *sizes)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK) {
        return status;
    }
    const int n = shm->n, me = shm->me;
    const size_t row = 2 * (size_t)n, header = sized_header_bytes(shm);
    const size_t stride = sized_rider_stride(shm), rider_max = sized_rider_max(shm);
    char *slot = tnt_shm_slot(shm, me, shm->phase + 1);
    uint64_t *mine = (uint64_t *)slot;
    size_t sdispl = 0;
    for (int j = 0; j < n; j++) {
        mine[j] = sendbytes[j];
        mine[n + j] = recvbytes[j];
        if (j != me && sendbytes[j] > 0 && sendbytes[j] <= rider_max) {
            memcpy(slot + header + (size_t)j * stride, (const char *)sendbuf + sdispl, sendbytes[j]);
        }
        sdispl += sendbytes[j];
    }
    /* For the single copies of large blocks, which only the sizes decide. */
    tnt_shm_publish(shm, sendbuf, NULL);
    tnt_shm_expect(shm, TNT_SHM_KIND_ALLTOALL, 0, 0, 0);
    status = tnt_shm_phase(shm, "alltoall");
    for (int r = 0; status == TNT_OK && r < n; r++) {
        memcpy(sizes + (size_t)r * row, tnt_shm_slot(shm, r, shm->phase), row * sizeof(uint64_t));
    }
    return status;
}

tnt_status_t tnt_shm_alltoallv_sized_finish(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                            const size_t *all_send)
{
    const int n = shm->n, me = shm->me;
    size_t largest = alltoallv_own_block(shm, sendbuf, recvbuf, all_send);
    /* The small blocks came with the sizes. */
    const size_t header = sized_header_bytes(shm), stride = sized_rider_stride(shm);
    const size_t rider_max = sized_rider_max(shm);
    size_t rdispl = 0;
    for (int r = 0; r < n; r++) {
        size_t from_r = all_send[(size_t)r * (size_t)n + (size_t)me];
        if (r != me && from_r > 0 && from_r <= rider_max) {
            memcpy((char *)recvbuf + rdispl,
                   tnt_shm_slot(shm, r, shm->phase) + header + (size_t)me * stride, from_r);
        }
        rdispl += from_r;
    }
    if (largest <= rider_max) {
        return TNT_OK;
    }
    if (tnt_shm_block_cma(shm, largest, 1)) {
        return alltoallv_cma_read(shm, recvbuf, all_send, rider_max);
    }
    return alltoallv_pieces(shm, sendbuf, recvbuf, all_send, largest, rider_max);
}
