/*
 * Shared-memory reductions: allreduce, reduce_scatter and allgather_slices.
 *
 * Three algorithms, chosen by message size only (so every rank picks the
 * same one):
 *  - small: every rank copies its vector into its slot, one phase, then
 *    every rank reduces all n slots itself. One synchronisation; the
 *    redundant arithmetic is cheap at these sizes.
 *  - CMA (Linux cross-memory attach, process_vm_readv/writev): every rank
 *    reduces its own slice (tnt_slice) by reading the peers' user
 *    buffers directly, block by block into a private L2-sized buffer,
 *    writes the result block into its recvbuf and, while it is still in
 *    cache, into every peer's recvbuf. One copy of each peer's data in each
 *    direction, no staging, no serial root, two phases in all however large
 *    the message.
 *    Used when every local rank could read every other at create time.
 *  - staged: the same slice decomposition pipelined through each rank's two
 *    bounded slots: per step, each rank copies a piece of every other
 *    rank's slice into its slot, reduces its own piece from all slots into
 *    its other slot, and everyone copies the reduced pieces out. Shared
 *    memory stays bounded (TNT_SHM_STAGING_KB per rank) for any count.
 *    From TNT_SHM_STREAM_KB on, the staged algorithm may stream: the copies
 *    into the slots and out of them into recvbuf use non-temporal stores
 *    (shm_stream.h), and each rank reduces its piece straight into its own
 *    recvbuf, block by block, streaming each block from L1 into its slot
 *    for the others. Data then moves between cores through memory instead
 *    of cache to cache. Which wins depends on where the cores sit, which
 *    can change while a job runs (streaming wins between cores that share
 *    no cache and loses between cores that share one; figures:
 *    docs/benchmarks.md, "Figures behind the copy choices"). So by default
 *    (TNT_SHM_STREAM=auto) local rank 0 times the large staged collectives
 *    per byte and plans the kind each call uses, trying the other now and
 *    then to notice a change (shm_stream_auto.h), and every local rank
 *    follows the plan. Both kinds put the same bytes in the same places of
 *    the slots at the same phases, and reduce in the same order, so results
 *    stay bitwise identical whichever kind a call uses.
 * In every algorithm the sources are combined in local-rank order 0, 1, ...
 * by the same kernel, so results are bitwise identical on every rank and do
 * not depend on timing. The hot loops do no allocation; the CMA path makes
 * one process_vm_readv per peer and 64 KiB block (a few per MiB).
 */
#include "reduce/reduce.h"
#include "transport/shm_impl.h"
#include "transport/shm_stream.h"
#include "util/dtype.h"
#include "util/log.h"
#include "util/wait.h"

#include <string.h>

/* From this many bytes on CMA is used when available (below it the staged
 * copies are cheaper than the system calls and the extra phases). */
#define TNT_SHM_CMA_MIN (256 * 1024)

static tnt_status_t tnt_shm_check_args(struct tnt_shm *shm, const void *sendbuf,
                                       const void *recvbuf, size_t count, tnt_dtype_t dtype,
                                       tnt_op_t op, enum tnt_shm_kind kind, const char *what)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK) {
        return status;
    }
    if (tnt_dtype_size(dtype) == 0 || (unsigned)op >= TNT_OP_LAST ||
        (count > 0 && (sendbuf == NULL || recvbuf == NULL))) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "rank %d: %s: bad dtype %d, op %d or NULL buffer",
                               shm->global_ranks[shm->me], what, (int)dtype, (int)op);
    }
    /* Every path below starts with a phase when there is anything to do. */
    if (shm->n > 1 && count > 0) {
        tnt_shm_expect(shm, kind, count, (unsigned)dtype, (unsigned)op);
    }
    return TNT_OK;
}

/* Elements of one slice that fit in a slot shared by `parts` pieces, rounded
 * down to whole cache lines so that pieces never share a line. */
static size_t tnt_shm_piece_elems(const struct tnt_shm *shm, size_t esize, size_t parts)
{
    size_t bytes = shm->slot_bytes / parts / TNT_SHM_CACHE_LINE * TNT_SHM_CACHE_LINE;
    return bytes >= esize ? bytes / esize : 1;
}

static size_t tnt_shm_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

static void tnt_shm_memcpy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

/* ---- small ------------------------------------------------------------- */

static tnt_status_t tnt_shm_allreduce_small(struct tnt_shm *shm, const void *sendbuf, void *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                            double scale)
{
    tnt_reduce_copy_scaled(dtype, tnt_shm_slot(shm, shm->me, shm->phase + 1), sendbuf, count,
                           scale);
    tnt_status_t status = tnt_shm_phase(shm, "allreduce");
    if (status != TNT_OK) {
        return status;
    }
    for (int j = 0; j < shm->n; j++) {
        shm->srcs[j] = tnt_shm_slot(shm, j, shm->phase);
    }
    tnt_reduce_n_div(dtype, op, recvbuf, shm->srcs, shm->n, count, op == TNT_AVG ? shm->n : 1);
    /* The slot this rank writes next was last read in phase - 1, and every
     * peer has reached phase since, so it is done with it: take its lines
     * now (shm_impl.h, "Taking lines early"), not at the next call's
     * store, where every peer waits for them. Small vectors only: taking
     * a large slot at once made the calls slower (TNT_SHM_TAKE_SLOT_MAX). */
    if (shm->take_lines && count * tnt_dtype_bytes(dtype) <= TNT_SHM_TAKE_SLOT_MAX) {
        tnt_shm_prefetch_lines(tnt_shm_slot(shm, shm->me, shm->phase + 1),
                               count * tnt_dtype_bytes(dtype), 1);
    }
    return TNT_OK;
}

/* ---- reduce (eager) ------------------------------------------------------ */

int tnt_shm_reduce_eager(const tnt_shm_t *shm, size_t bytes)
{
    return shm->n > 1 && bytes <= TNT_SHM_EAGER_MAX && bytes <= shm->small_max;
}

/* The one-phase small allreduce seen from the root: the same slots, the
 * same tnt_reduce_n_div over them in rank order, so the root's result is
 * bitwise the allreduce's. The others hand their vector off and return
 * (shm_impl.h, "Eager rooted calls"). */
tnt_status_t tnt_shm_reduce(tnt_shm_t *shm, const void *sendbuf, void *recvbuf, size_t count,
                            tnt_dtype_t dtype, tnt_op_t op, int root)
{
    /* Every call here is eager (the caller sends the others to
     * tnt_shm_allreduce), or fails on a bad argument before it moves
     * anything. */
    tnt_status_t status = tnt_shm_begin_settle(shm, 0);
    if (status != TNT_OK) {
        return status;
    }
    if (root < 0 || root >= shm->n || tnt_dtype_bytes(dtype) == 0 || (unsigned)op >= TNT_OP_LAST ||
        (count > 0 && sendbuf == NULL) ||
        !tnt_shm_reduce_eager(shm, count * tnt_dtype_bytes(dtype))) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "rank %d: reduce: bad root local rank %d, dtype %d, op %d, count "
                               "%zu or NULL buffer",
                               shm->global_ranks[shm->me], root, (int)dtype, (int)op, count);
    }
    if (count == 0) {
        return TNT_OK;
    }
    const int sends = shm->me != root;
    unsigned char *data;
    const size_t bytes = count * tnt_dtype_bytes(dtype);
    status = tnt_shm_eager_claim(shm, TNT_SHM_KIND_REDUCE, count, (unsigned)dtype, (unsigned)op,
                                 root, sends, bytes, "reduce", &data);
    if (status != TNT_OK) {
        return status;
    }
    tnt_reduce_copy_scaled(dtype, data, sendbuf, count, 1.0);
    if ((status = tnt_shm_eager_publish(shm, sends, "reduce")) != TNT_OK || sends) {
        return status;
    }
    for (int j = 0; j < shm->n; j++) {
        if (j != shm->me) {
            tnt_shm_ring_prefetch_read(shm, j, shm->phase + 1, bytes, 0, bytes);
        }
        shm->srcs[j] = tnt_shm_ring_data(shm, j, shm->phase, bytes);
    }
    tnt_reduce_n_div(dtype, op, recvbuf, shm->srcs, shm->n, count, op == TNT_AVG ? shm->n : 1);
    return TNT_OK;
}

/* ---- staged ------------------------------------------------------------ */

/* allgather_result: allreduce (every rank gets every slice) instead of
 * reduce_scatter (own slice only, reduced straight into recvbuf). */
static tnt_status_t tnt_shm_reduce_staged(struct tnt_shm *shm, const char *sendbuf, char *recvbuf,
                                          size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                          double scale, int allgather_result, const char *what)
{
    const size_t es = tnt_dtype_size(dtype);
    const int n = shm->n, me = shm->me;
    const int divisor = op == TNT_AVG ? n : 1;
    const size_t piece = tnt_shm_piece_elems(shm, es, (size_t)n);
    size_t my_off, my_cnt, off, cnt, max_cnt;
    tnt_status_t status;

    tnt_slice(count, me, n, &my_off, &my_cnt);
    tnt_slice(count, 0, n, &off, &max_cnt); /* slice 0 is the largest */
    for (size_t k0 = 0; k0 < max_cnt; k0 += piece) {
        /* Copy in: piece k of every other rank's slice, at piece offset j. */
        /* With a scale, this rank's own piece is copied (scaled) too, into
         * its own position of its slot, which no peer reads: weighting then
         * rides on the copy instead of costing a pass of its own. */
        char *in = tnt_shm_slot(shm, me, shm->phase + 1);
        for (int j = 0; j < n; j++) {
            tnt_slice(count, j, n, &off, &cnt);
            if ((j != me || scale != 1.0) && k0 < cnt) {
                tnt_reduce_copy_scaled(dtype, in + (size_t)j * piece * es,
                                       sendbuf + (off + k0) * es, tnt_shm_min(piece, cnt - k0),
                                       scale);
            }
        }
        if ((status = tnt_shm_phase(shm, what)) != TNT_OK) {
            return status;
        }

        /* Reduce my piece from every rank's slot (my own straight from
         * sendbuf), in local-rank order. */
        if (k0 < my_cnt) {
            for (int j = 0; j < n; j++) {
                shm->srcs[j] = j == me && scale == 1.0
                                   ? sendbuf + (my_off + k0) * es
                                   : tnt_shm_slot(shm, j, shm->phase) + (size_t)me * piece * es;
            }
            void *dst = allgather_result ? tnt_shm_slot(shm, me, shm->phase + 1)
                                         : recvbuf + (my_off + k0) * es;
            tnt_reduce_n_div(dtype, op, dst, shm->srcs, n, tnt_shm_min(piece, my_cnt - k0),
                             divisor);
        }
        if (!allgather_result) {
            continue;
        }
        if ((status = tnt_shm_phase(shm, what)) != TNT_OK) {
            return status;
        }

        /* Copy out every rank's reduced piece (mine included). */
        for (int j = 0; j < n; j++) {
            tnt_slice(count, j, n, &off, &cnt);
            if (k0 < cnt) {
                memcpy(recvbuf + (off + k0) * es, tnt_shm_slot(shm, j, shm->phase),
                       tnt_shm_min(piece, cnt - k0) * es);
            }
        }
    }
    return TNT_OK;
}

/* ---- streamed ---------------------------------------------------------- */

/* The staged algorithm for large messages (see the top of the file): the same
 * pieces, phases and reduction order, with streaming stores wherever data is
 * written for another core or written once and not read again soon. */
static tnt_status_t tnt_shm_reduce_streamed(struct tnt_shm *shm, const char *sendbuf, char *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                            double scale, int allgather_result, const char *what)
{
    const size_t es = tnt_dtype_size(dtype);
    const int n = shm->n, me = shm->me;
    const int divisor = op == TNT_AVG ? n : 1;
    const size_t piece = tnt_shm_piece_elems(shm, es, (size_t)n);
    /* Reduced blocks small enough to stay in L1 between the reduction and
     * the streaming copy into the slot. */
    const size_t block = TNT_SHM_BOUNCE_BYTES / es;
    size_t my_off, my_cnt, off, cnt, max_cnt;
    tnt_status_t status;

    tnt_slice(count, me, n, &my_off, &my_cnt);
    tnt_slice(count, 0, n, &off, &max_cnt);
    for (size_t k0 = 0; k0 < max_cnt; k0 += piece) {
        /* Copy in: piece k of every other rank's slice, streamed, since the
         * other ranks read it. The own piece is needed only when scaled,
         * and only by this rank: an ordinary copy keeps it in cache. */
        char *in = tnt_shm_slot(shm, me, shm->phase + 1);
        for (int j = 0; j < n; j++) {
            tnt_slice(count, j, n, &off, &cnt);
            if (k0 >= cnt) {
                continue;
            }
            size_t len = tnt_shm_min(piece, cnt - k0);
            if (j != me) {
                tnt_shm_stream_copy_scaled(dtype, in + (size_t)j * piece * es,
                                           sendbuf + (off + k0) * es, len, scale, shm->bounce,
                                           TNT_SHM_BOUNCE_BYTES);
            } else if (scale != 1.0) {
                tnt_reduce_copy_scaled(dtype, in + (size_t)j * piece * es,
                                       sendbuf + (off + k0) * es, len, scale);
            }
        }
        if ((status = tnt_shm_phase(shm, what)) != TNT_OK) {
            return status;
        }

        /* Reduce my piece in local-rank order straight into recvbuf (only
         * this rank touches its own slice of recvbuf, and in place the own
         * source is read block by block before it is overwritten); with
         * allgather_result each block is streamed on into my other slot. */
        if (k0 < my_cnt) {
            const size_t len = tnt_shm_min(piece, my_cnt - k0);
            char *out = tnt_shm_slot(shm, me, shm->phase + 1);
            for (size_t b = 0; b < len; b += block) {
                const size_t blen = tnt_shm_min(block, len - b);
                const size_t pos = my_off + k0 + b;
                for (int j = 0; j < n; j++) {
                    shm->srcs[j] = j == me && scale == 1.0 ? sendbuf + pos * es
                                                           : tnt_shm_slot(shm, j, shm->phase) +
                                                                 ((size_t)me * piece + b) * es;
                }
                tnt_reduce_n_div(dtype, op, recvbuf + pos * es, shm->srcs, n, blen, divisor);
                if (allgather_result) {
                    tnt_shm_stream_copy(out + b * es, recvbuf + pos * es, blen * es);
                }
            }
        }
        if (!allgather_result) {
            continue;
        }
        if ((status = tnt_shm_phase(shm, what)) != TNT_OK) {
            return status;
        }

        /* Copy out the other ranks' reduced pieces, streamed: recvbuf is
         * written once here and not read again by this collective. */
        for (int j = 0; j < n; j++) {
            tnt_slice(count, j, n, &off, &cnt);
            if (j != me && k0 < cnt) {
                tnt_shm_stream_copy(recvbuf + (off + k0) * es, tnt_shm_slot(shm, j, shm->phase),
                                    tnt_shm_min(piece, cnt - k0) * es);
            }
        }
    }
    return TNT_OK;
}

/* Whether this call of a staged collective streams: below stream_min never;
 * else on, off, or (auto) the kind local rank 0 planned for it, so that all
 * local ranks use the same kind. Every local rank calls this once per staged
 * collective of stream_min bytes or more, so their call numbers agree.
 * At call k rank 0 stores the plan for call k + 1 of the same op and size
 * class (relaxed) in entry (k + 1) & 1, before it finishes call k's first
 * phase. A peer reads entry (k + 1) & 1 at call k + 1, after its acquire of
 * that phase, so the plan is there in time. The entry's previous reader,
 * call k - 1, read it before finishing call k - 1's first phase, which rank
 * 0 waited for before it could start call k: no read sees a later plan. */
static int tnt_shm_stream_kind(struct tnt_shm *shm, enum tnt_shm_stream_op op, size_t bytes)
{
    if (bytes < shm->stream_min || shm->stream_mode == TNT_SETTINGS_STREAM_OFF) {
        return TNT_STREAM_KIND_CACHED;
    }
    if (shm->stream_mode == TNT_SETTINGS_STREAM_ON) {
        return TNT_STREAM_KIND_STREAMED;
    }
    struct tnt_stream_auto *a = &shm->stream_auto[op];
    const int c = tnt_stream_auto_class_of(a, bytes);
    const uint32_t call = shm->stream_calls[op][c]++;
    _Atomic uint8_t *plan = shm->ctl[0].stream_cached[op][c];
    const int kind = atomic_load_explicit(&plan[call & 1], memory_order_relaxed)
                         ? TNT_STREAM_KIND_CACHED
                         : TNT_STREAM_KIND_STREAMED;
    if (shm->me == 0) {
        const int next = tnt_stream_auto_pick(a, bytes);
        atomic_store_explicit(&plan[(call + 1) & 1], next == TNT_STREAM_KIND_CACHED,
                              memory_order_relaxed);
        /* The first call of a size class not used yet starts from what the
         * nearest learned class chose (entry 0, read at call 0). */
        for (int d = 0; d < TNT_STREAM_AUTO_CLASSES; d++) {
            if (shm->stream_calls[op][d] == 0) {
                atomic_store_explicit(&shm->ctl[0].stream_cached[op][d][0],
                                      tnt_stream_auto_first(a, d) == TNT_STREAM_KIND_CACHED,
                                      memory_order_relaxed);
            }
        }
    }
    return kind;
}

/* Local rank 0 learns from the time of each planned call. */
static void tnt_shm_stream_learn(struct tnt_shm *shm, enum tnt_shm_stream_op op, size_t bytes,
                                 int kind, uint64_t t0, tnt_status_t status)
{
    if (shm->me == 0 && status == TNT_OK && bytes >= shm->stream_min &&
        shm->stream_mode == TNT_SETTINGS_STREAM_AUTO) {
        tnt_stream_auto_learn(&shm->stream_auto[op], bytes, kind, tnt_time_ns() - t0);
    }
}

/* ---- CMA --------------------------------------------------------------- */

/* Every rank reads the other ranks' slices from their buffers (published
 * recvbuf addresses) into its own buf; one final phase keeps each buffer
 * alive and unchanged until every peer has read it. */
static tnt_status_t tnt_shm_gather_slices_cma(struct tnt_shm *shm, char *buf, size_t count,
                                              size_t es, const char *what)
{
    size_t off, cnt;
    tnt_status_t status;
    for (int j = 0; j < shm->n; j++) {
        tnt_slice(count, j, shm->n, &off, &cnt);
        if (j == shm->me || cnt == 0) {
            continue;
        }
        status = tnt_shm_cma_read(shm, j, buf + off * es, tnt_shm_peer_buf(shm, j, 1) + off * es,
                                  cnt * es, what);
        if (status != TNT_OK) {
            return status;
        }
    }
    return tnt_shm_phase(shm, what);
}

static tnt_status_t tnt_shm_reduce_cma(struct tnt_shm *shm, const char *sendbuf, char *recvbuf,
                                       size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                       int allgather_result, const char *what)
{
    const size_t es = tnt_dtype_size(dtype);
    const int n = shm->n, me = shm->me;
    const int divisor = op == TNT_AVG ? n : 1;
    const size_t block = shm->cma_block_bytes / es;
    size_t my_off, my_cnt;
    tnt_status_t status;

    tnt_shm_publish(shm, sendbuf, recvbuf);
    if ((status = tnt_shm_phase(shm, what)) != TNT_OK) {
        return status;
    }

    /* Peers do not write their slice `me` of recvbuf (even in place) until
     * they have seen this rank finish the next phase, so it is stable. */
    tnt_slice(count, me, n, &my_off, &my_cnt);
    for (size_t b0 = 0; b0 < my_cnt; b0 += block) {
        size_t len = tnt_shm_min(block, my_cnt - b0);
        size_t pos = (my_off + b0) * es;
        for (int j = 0; j < n; j++) {
            if (j == me) {
                shm->srcs[j] = sendbuf + pos;
                continue;
            }
            char *tmp = shm->cma_tmp + (size_t)j * shm->cma_block_bytes;
            status =
                tnt_shm_cma_read(shm, j, tmp, tnt_shm_peer_buf(shm, j, 0) + pos, len * es, what);
            if (status != TNT_OK) {
                return status;
            }
            shm->srcs[j] = tmp;
        }
        tnt_reduce_n_div(dtype, op, recvbuf + pos, shm->srcs, n, len, divisor);
        if (!allgather_result) {
            continue;
        }
        /* Push the block, still in this core's cache, into every peer's
         * recvbuf: that saves the peers a read of it from memory later.
         * Only this rank writes slice `me` of the peers' recvbufs, and no
         * peer reads it (in place, only this rank read it, just above). */
        for (int j = 0; j < n; j++) {
            if (j == me) {
                continue;
            }
            status = tnt_shm_cma_write(shm, j, recvbuf + pos, tnt_shm_peer_buf(shm, j, 1) + pos,
                                       len * es, what);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    /* Every slice is reduced and delivered, and nobody reads this rank's
     * buffers any more. */
    return tnt_shm_phase(shm, what);
}

/* ---- public ------------------------------------------------------------ */

tnt_status_t tnt_shm_allreduce(tnt_shm_t *shm, const void *sendbuf, void *recvbuf, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op)
{
    return tnt_shm_allreduce_scaled(shm, sendbuf, recvbuf, count, dtype, op, 1.0);
}

tnt_status_t tnt_shm_allreduce_scaled(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                      size_t count, tnt_dtype_t dtype, tnt_op_t op, double scale)
{
    tnt_status_t status = tnt_shm_check_args(shm, sendbuf, recvbuf, count, dtype, op,
                                             TNT_SHM_KIND_ALLREDUCE, "allreduce");
    if (status != TNT_OK || count == 0) {
        return status;
    }
    size_t bytes = count * tnt_dtype_size(dtype);
    if (shm->n == 1) {
        if (sendbuf != recvbuf) {
            tnt_reduce_copy_scaled(dtype, recvbuf, sendbuf, count, scale);
        } else {
            tnt_reduce_scale(dtype, recvbuf, count, scale);
        }
        return TNT_OK;
    }
    if (bytes <= shm->small_max && bytes <= shm->slot_bytes) {
        return tnt_shm_allreduce_small(shm, sendbuf, recvbuf, count, dtype, op, scale);
    }
    if (shm->cma_all && bytes >= TNT_SHM_CMA_MIN) {
        /* CMA reads the peers' buffers directly, so there is no copy to
         * scale on: scale into recvbuf first and reduce that in place. */
        if (scale != 1.0) {
            if (sendbuf != recvbuf) {
                tnt_reduce_copy_scaled(dtype, recvbuf, sendbuf, count, scale);
            } else {
                tnt_reduce_scale(dtype, recvbuf, count, scale);
            }
            sendbuf = recvbuf;
        }
        return tnt_shm_reduce_cma(shm, sendbuf, recvbuf, count, dtype, op, 1, "allreduce");
    }
    /* Timed (vDSO clock, no system call) for TNT_SHM_STREAM=auto. */
    const int kind = tnt_shm_stream_kind(shm, TNT_SHM_STREAM_ALLREDUCE, bytes);
    const uint64_t t0 = tnt_time_ns();
    if (kind == TNT_STREAM_KIND_STREAMED) {
        status =
            tnt_shm_reduce_streamed(shm, sendbuf, recvbuf, count, dtype, op, scale, 1, "allreduce");
    } else {
        status =
            tnt_shm_reduce_staged(shm, sendbuf, recvbuf, count, dtype, op, scale, 1, "allreduce");
    }
    tnt_shm_stream_learn(shm, TNT_SHM_STREAM_ALLREDUCE, bytes, kind, t0, status);
    return status;
}

tnt_status_t tnt_shm_reduce_scatter(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                                    size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_status_t status = tnt_shm_check_args(shm, sendbuf, recvbuf, count, dtype, op,
                                             TNT_SHM_KIND_REDUCE_SCATTER, "reduce_scatter");
    if (status != TNT_OK || count == 0) {
        return status;
    }
    size_t es = tnt_dtype_size(dtype);
    if (shm->n == 1) {
        if (sendbuf != recvbuf) {
            memcpy(recvbuf, sendbuf, count * es);
        }
        return TNT_OK;
    }
    if (shm->cma_all && count * es >= TNT_SHM_CMA_MIN) {
        return tnt_shm_reduce_cma(shm, sendbuf, recvbuf, count, dtype, op, 0, "reduce_scatter");
    }
    const int kind = tnt_shm_stream_kind(shm, TNT_SHM_STREAM_REDUCE_SCATTER, count * es);
    const uint64_t t0 = tnt_time_ns();
    if (kind == TNT_STREAM_KIND_STREAMED) {
        status = tnt_shm_reduce_streamed(shm, sendbuf, recvbuf, count, dtype, op, 1.0, 0,
                                         "reduce_scatter");
    } else {
        status = tnt_shm_reduce_staged(shm, sendbuf, recvbuf, count, dtype, op, 1.0, 0,
                                       "reduce_scatter");
    }
    tnt_shm_stream_learn(shm, TNT_SHM_STREAM_REDUCE_SCATTER, count * es, kind, t0, status);
    return status;
}

tnt_status_t tnt_shm_allgather_slices(tnt_shm_t *shm, void *buf, size_t count, tnt_dtype_t dtype)
{
    tnt_status_t status = tnt_shm_check_args(shm, buf, buf, count, dtype, TNT_SUM,
                                             TNT_SHM_KIND_ALLGATHER_SLICES, "allgather_slices");
    if (status != TNT_OK || count == 0 || shm->n == 1) {
        return status;
    }
    const size_t es = tnt_dtype_size(dtype);
    char *b = buf;
    if (shm->cma_all && count * es >= TNT_SHM_CMA_MIN) {
        tnt_shm_publish(shm, buf, buf);
        if ((status = tnt_shm_phase(shm, "allgather_slices")) != TNT_OK) {
            return status;
        }
        return tnt_shm_gather_slices_cma(shm, b, count, es, "allgather_slices");
    }

    const size_t piece = tnt_shm_piece_elems(shm, es, 1);
    /* Large ones may stream both copies, as the streamed allreduce does. */
    const int kind = tnt_shm_stream_kind(shm, TNT_SHM_STREAM_ALLGATHER_SLICES, count * es);
    const uint64_t t0 = tnt_time_ns();
    void (*copy)(void *, const void *, size_t) =
        kind == TNT_STREAM_KIND_STREAMED ? tnt_shm_stream_copy : tnt_shm_memcpy;
    size_t my_off, my_cnt, off, cnt, max_cnt;
    tnt_slice(count, shm->me, shm->n, &my_off, &my_cnt);
    tnt_slice(count, 0, shm->n, &off, &max_cnt);
    for (size_t k0 = 0; k0 < max_cnt; k0 += piece) {
        if (k0 < my_cnt) {
            copy(tnt_shm_slot(shm, shm->me, shm->phase + 1), b + (my_off + k0) * es,
                 tnt_shm_min(piece, my_cnt - k0) * es);
        }
        if ((status = tnt_shm_phase(shm, "allgather_slices")) != TNT_OK) {
            return status;
        }
        for (int j = 0; j < shm->n; j++) {
            tnt_slice(count, j, shm->n, &off, &cnt);
            if (j != shm->me && k0 < cnt) {
                copy(b + (off + k0) * es, tnt_shm_slot(shm, j, shm->phase),
                     tnt_shm_min(piece, cnt - k0) * es);
            }
        }
    }
    tnt_shm_stream_learn(shm, TNT_SHM_STREAM_ALLGATHER_SLICES, count * es, kind, t0, TNT_OK);
    return TNT_OK;
}
