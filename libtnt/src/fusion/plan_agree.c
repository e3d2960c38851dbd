/*
 * Plan agreement: every rank must run the same fusion plan, or the buckets'
 * collectives would pair different tensors. tnt_fusion_create digests its
 * plan here, compares every rank's summary (a MAX of a hash and its
 * negation; the summaries themselves are gathered only when they differ),
 * so that either
 * all ranks get an engine or none does, and a difference is named (which
 * ranks, and whether the threshold, the reduction or the tensors differ).
 */
#include "fusion/fusion.h"

#include "coll/coll.h"
#include "comm/comm.h"
#include "util/hash.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fusion_op_name(tnt_op_t op)
{
    static const char *const names[] = { "sum", "prod", "min", "max", "avg" };
    return (unsigned)op < (unsigned)TNT_OP_LAST ? names[op] : "?";
}

const char *tnt_fusion_compression_name(tnt_compression_t compression)
{
    static const char *const names[] = { "none", "fp16", "bf16" };
    return (unsigned)compression < (unsigned)TNT_COMPRESSION_LAST ? names[compression] : "?";
}

uint64_t tnt_fusion_plan_digest(const tnt_tensor_desc_t *tensors, size_t num_tensors,
                                const size_t *bucket_of_tensor, size_t threshold_bytes, tnt_op_t op,
                                tnt_compression_t compression)
{
    uint64_t digest = TNT_FNV1A_INIT;

    digest = tnt_fnv1a_u64(digest, threshold_bytes);
    digest = tnt_fnv1a_u64(digest, (uint64_t)op);
    digest = tnt_fnv1a_u64(digest, (uint64_t)compression);
    digest = tnt_fnv1a_u64(digest, num_tensors);
    for (size_t i = 0; i < num_tensors; i++) {
        digest = tnt_fnv1a_u64(digest, tensors[i].count);
        digest = tnt_fnv1a_u64(digest, (uint64_t)tensors[i].dtype);
        digest = tnt_fnv1a_u64(digest, bucket_of_tensor[i]);
    }
    return digest;
}

/* The summary's fields, hashed: equal on two ranks exactly when their
 * summaries are (barring a collision), like the digest itself. */
static int64_t fusion_summary_hash(const tnt_fusion_summary_t *s)
{
    uint64_t h = TNT_FNV1A_INIT;

    h = tnt_fnv1a_u64(h, s->digest);
    h = tnt_fnv1a_u64(h, s->num_tensors);
    h = tnt_fnv1a_u64(h, s->num_buckets);
    h = tnt_fnv1a_u64(h, s->threshold);
    h = tnt_fnv1a_u64(h, s->total_bytes);
    h = tnt_fnv1a_u64(h, ((uint64_t)s->op << 32) | s->failed);
    h = tnt_fnv1a_u64(h, s->compression);
    /* Below 2^62 in magnitude, so its negation cannot overflow. */
    return (int64_t)(h >> 2);
}

tnt_status_t tnt_fusion_plan_agree(tnt_comm_t *comm, const tnt_fusion_summary_t *mine)
{
    const int size = comm->size;
    tnt_fusion_summary_t *all;
    tnt_status_t status;
    /* First a MAX of (failed, hash, -hash): O(log nodes) latencies and 24
     * bytes, however many ranks. The plans agree when nobody failed and the
     * largest hash equals the smallest; only otherwise are the summaries
     * gathered, to name the ranks and what differs. */
    int64_t probe[3] = { mine->failed != 0, fusion_summary_hash(mine), 0 };

    probe[2] = -probe[1];
    /* Blocking collectives run after earlier nonblocking ones, and alone. */
    status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_allreduce(comm, probe, probe, 3, TNT_INT64, TNT_MAX);
        tnt_progress_leave(comm);
    }
    if (status != TNT_OK) {
        return status;
    }
    if (probe[0] == 0 && probe[1] == -probe[2]) {
        return TNT_OK;
    }

    all = calloc((size_t)size, sizeof(*all));
    if (all == NULL) {
        /* Peers wait for this rank in the allgather until TNT_TIMEOUT, and
         * that error names it. */
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "tnt_fusion_create: no memory to compare the plans of %d ranks",
                               size);
    }
    status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_allgather(comm, mine, all, sizeof(*mine));
        tnt_progress_leave(comm);
    }
    if (status != TNT_OK) {
        goto out_free;
    }

    const tnt_fusion_summary_t *ref = &all[0];
    char ranks[256];
    size_t used = 0, listed = 0, differing = 0;
    int first_diff = -1;
    ranks[0] = '\0';

    /* Ranks that could not build their engine (bad arguments, no memory):
     * they took part only so that nobody waits for them; nobody proceeds. */
    for (int r = 0; r < size; r++) {
        if (!all[r].failed) {
            continue;
        }
        differing++;
        if (listed < TNT_FUSION_LIST_MAX && used < sizeof(ranks)) {
            int w = snprintf(ranks + used, sizeof(ranks) - used, "%s%d", listed ? ", " : "", r);
            used += w > 0 ? (size_t)w : 0;
            listed++;
        }
    }
    if (differing > 0) {
        if (differing > listed && used < sizeof(ranks)) {
            snprintf(ranks + used, sizeof(ranks) - used, ", ... (%zu in all)", differing);
        }
        /* Logged once, by rank 0 (unless it is one of them: each of those
         * logged its own cause); the others only record it. */
        status = (comm->rank == 0 && !mine->failed ? tnt_error_raise : tnt_error_set)(
            TNT_ERR_MISMATCH,
            "tnt_fusion_create: rank(s) %s could not set up their fusion engine (see their "
            "error: invalid tensors or arguments, or no memory), so no rank creates it",
            ranks);
        goto out_free;
    }
    for (int r = 1; r < size; r++) {
        if (memcmp(&all[r], ref, sizeof(*ref)) == 0) {
            continue;
        }
        differing++;
        if (first_diff < 0) {
            first_diff = r;
        }
        if (listed < TNT_FUSION_LIST_MAX && used < sizeof(ranks)) {
            int w = snprintf(ranks + used, sizeof(ranks) - used, "%s%d", listed ? ", " : "", r);
            used += w > 0 ? (size_t)w : 0;
            listed++;
        }
    }
    if (differing == 0) {
        goto out_free;
    }
    if (differing > listed && used < sizeof(ranks)) {
        snprintf(ranks + used, sizeof(ranks) - used, ", ... (%zu in all)", differing);
    }

    const tnt_fusion_summary_t *other = &all[first_diff];
    char detail[256];
    if (other->threshold != ref->threshold) {
        snprintf(detail, sizeof(detail),
                 "; the fusion threshold differs (%llu vs %llu bytes): set "
                 "TNT_FUSION_THRESHOLD_KB alike on every rank",
                 (unsigned long long)ref->threshold, (unsigned long long)other->threshold);
    } else if (other->compression != ref->compression) {
        snprintf(detail, sizeof(detail),
                 "; the gradient compression differs (%s vs %s): pass the same compression "
                 "on every rank",
                 tnt_fusion_compression_name((tnt_compression_t)ref->compression),
                 tnt_fusion_compression_name((tnt_compression_t)other->compression));
    } else if (other->op != ref->op) {
        snprintf(detail, sizeof(detail), "; the reduction differs (%s vs %s)",
                 fusion_op_name((tnt_op_t)ref->op), fusion_op_name((tnt_op_t)other->op));
    } else if (other->num_tensors == ref->num_tensors && other->total_bytes == ref->total_bytes) {
        snprintf(detail, sizeof(detail),
                 "; same sizes in total, but the tensors' order, counts "
                 "or dtypes differ");
    } else {
        snprintf(detail, sizeof(detail), "; %llu vs %llu bytes in all",
                 (unsigned long long)ref->total_bytes, (unsigned long long)other->total_bytes);
    }
    /* Rank 0 and the ranks that differ say it; the others only record it,
     * so a 64-rank job does not print 64 copies of one line. */
    const int speak = comm->rank == 0 || memcmp(&all[comm->rank], ref, sizeof(*ref)) != 0;
    status = (speak ? tnt_error_raise : tnt_error_set)(
        TNT_ERR_MISMATCH,
        "fusion plan differs from rank 0's on rank(s) %s (%llu tensors / %llu buckets vs "
        "%llu / %llu on rank %d%s); every rank must register the same tensors in the same "
        "order",
        ranks, (unsigned long long)ref->num_tensors, (unsigned long long)ref->num_buckets,
        (unsigned long long)other->num_tensors, (unsigned long long)other->num_buckets, first_diff,
        detail);
out_free:
    free(all);
    return status;
}
