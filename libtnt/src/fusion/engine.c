/*
 * The fusion engine: bucketed gradient allreduce that overlaps with backprop.
 *
 * Life of a step (all ranks run the same plan, checked at create):
 *  - mark_ready(i, data, scale) on the training thread only records the
 *    pointer and the scale, so backprop continues at once. When a bucket's
 *    last tensor arrives, the bucket's request (embedded in the bucket, so
 *    nothing is allocated) is posted to the progress thread.
 *  - The progress thread then does all the data movement of the bucket:
 *      one tensor:           allreduce in place, the scale applied by the
 *                            collective's own copy into shared memory
 *                            (tnt_coll_allreduce_scaled: no extra pass);
 *      several tensors that lie back to back in memory, in bucket order
 *      (a flat gradient buffer laid out by the plan): the same, in place,
 *      as one allreduce (no copy; tensors with different scales are
 *      scaled in place first);
 *      otherwise:            copy each tensor, scaled, into its slot of the
 *      bucket's staging buffer (one pass), allreduce the staging buffer,
 *      copy the results back into each tensor;
 *      compressed (tnt_fusion_create_compressed, float32 buckets): round
 *      each tensor, scaled (and pre-divided by size for TNT_AVG), to the
 *      16-bit wire type in the bucket's 16-bit staging slot (one pass),
 *      allreduce that as a sum (16 bits in shared memory and on the wire,
 *      float32 accumulation inside every stage), and widen the result
 *      back into each tensor. Never split, never in place: the data is
 *      converted anyway.
 *    Scaling in place is allowed because the caller hands the data over
 *    until tnt_fusion_wait returns, and the result overwrites it anyway.
 *  - Buckets may fill out of order (hooks fire in whatever order autograd
 *    produces them), but the progress thread runs requests in posting order
 *    and collectives match only if every rank issues them in the same order.
 *    So buckets are posted strictly in bucket order: a full bucket waits until
 *    every earlier bucket has been posted, and posting one may release a run
 *    of later full buckets.
 *  - After the last bucket comes the step check: a MAX over the ranks of one
 *    flag saying whether this rank marked every tensor (O(log nodes)
 *    latencies), followed, only when a flag was set, by an allgather of the
 *    flags that names the ranks. Without
 *    it, a rank that forgot a tensor would leave its peers waiting for that
 *    bucket's allreduce until TNT_TIMEOUT; with it, the forgetting rank posts
 *    the missing buckets with zeros in place of the missing tensors, so every
 *    collective still matches, and then every rank learns from the check
 *    which ranks' results are incomplete and fails the step with their names.
 *  - wait() waits for all requests, reports, and resets for the next step.
 *
 * Memory: everything (tensor and bucket tables, one staging arena with a
 * 64-byte aligned slot per bucket that stages several tensors, the check's
 * buffer) is
 * allocated at create. Steady-state steps allocate nothing and make no
 * system call beyond the progress queue's futex wake-ups (none when a core
 * is free to poll on; comm/progress.c).
 *
 * Threads: mark_ready and wait may be called from any thread (autograd may
 * run hooks on its own threads); fusion->lock serialises them. The progress
 * thread reads a bucket's tensors only between the bucket's post (a mutex
 * hand-over, so the recorded pointers and scales happen-before) and its
 * completion (release store of the request status, acquired by wait).
 */
#include "fusion/fusion.h"

#include "coll/doctor.h"
#include "coll/coll.h"
#include "reduce/reduce.h"
#include "comm/comm.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUSION_ALIGN 64
/* At most this many tensor indices or ranks are spelled out in a message. */

struct fusion_tensor {
    size_t count;
    tnt_dtype_t dtype;
    size_t bucket;
    size_t offset_bytes; /* within the bucket's staging slot */
    void *data;          /* this step's pointer; NULL until marked */
    double scale;        /* this step's scale factor */
};

struct fusion_bucket {
    struct tnt_request req; /* posted to the progress thread; args.user = bucket */
    struct tnt_fusion *fusion;
    size_t first_tensor;
    size_t num_tensors;
    size_t count; /* elements over all its tensors */
    tnt_dtype_t dtype;
    /* Execution, decided from the plan alone (never from addresses) so that
     * every rank issues the same collectives: the first num_staged tensors
     * (staged_count elements) are reduced as one array, through staging
     * unless they lie back to back; when split, the last tensor is at least
     * the threshold by itself and is reduced in place as a second
     * collective instead of being copied. */
    size_t num_staged;
    size_t staged_count;
    int split;
    unsigned char *staging; /* NULL when num_staged == 1 (reduced in place) */
    unsigned char *wire;    /* compressed: count 16-bit elements; else NULL */
    int compressed;         /* a float32 bucket of a compressing engine */
    size_t staging_offset;  /* of staging in the arena (create only) */
    size_t marked;          /* tensors marked this step */
    int posted;             /* posted this step (and not yet waited for) */
};

struct tnt_fusion {
    tnt_comm_t *comm;
    tnt_op_t op;
    tnt_compression_t compression;
    tnt_dtype_t wire_dtype; /* TNT_FLOAT16/TNT_BFLOAT16 when compressing */
    size_t threshold;
    size_t num_tensors;
    size_t num_buckets;
    struct fusion_tensor *tensors;
    struct fusion_bucket *buckets;
    unsigned char *arena;     /* staging slots of all multi-tensor buckets */
    size_t max_single_bytes;  /* largest single-tensor bucket (for fill-in) */
    unsigned char *fill;      /* zeros for missing single tensors; lazily, error path */
    uint64_t copied_buckets;  /* multi-tensor bucket runs that needed the staging copy */
    uint64_t inplace_buckets; /* ... and that were reduced in place (contiguous) */
    uint64_t compressed_buckets; /* bucket runs sent as 16-bit */

    pthread_mutex_t lock;
    size_t next_post;  /* first bucket not yet posted this step */
    size_t num_marked; /* tensors marked this step */
    uint64_t step;     /* steps completed, for messages */
    int broken;        /* a request may still be running: unusable */

    /* The step check (see above). */
    struct tnt_request check_req;
    int check_posted;
    unsigned char my_incomplete;
    int32_t any_incomplete;    /* MAX of my_incomplete over the ranks */
    unsigned char *incomplete; /* comm->size bytes, gathered only on failure */
};

/* ------------------------------------------------------------------------ */
/* Progress-thread side                                                      */
/* ------------------------------------------------------------------------ */

/* Whether tensors [first, first + n) lie back to back in memory in that
 * order, so the user's memory can be reduced in place as one array. Returns
 * the start, or NULL. Zero-count tensors are ignored; an unmarked tensor
 * (fill-in) never qualifies. */
static unsigned char *fusion_run_contiguous(const struct tnt_fusion *fusion, size_t first, size_t n)
{
    unsigned char *base = NULL, *next = NULL;

    for (size_t i = first; i < first + n; i++) {
        const struct fusion_tensor *t = &fusion->tensors[i];
        if (t->count == 0) {
            continue;
        }
        if (t->data == NULL || (next != NULL && (unsigned char *)t->data != next)) {
            return NULL;
        }
        if (base == NULL) {
            base = t->data;
        }
        next = (unsigned char *)t->data + t->count * tnt_dtype_size(t->dtype);
    }
    return base;
}

/* One allreduce over tensors [first, first + n) of a bucket, count elements
 * in all (the same on every rank). staging holds their slots, or is NULL
 * when n == 1. Runs on the progress thread. */
static tnt_status_t fusion_reduce_run(tnt_comm_t *comm, struct tnt_fusion *fusion,
                                      tnt_dtype_t dtype, size_t first, size_t n, size_t count,
                                      unsigned char *staging)
{
    const size_t elem = tnt_dtype_size(dtype);
    unsigned char *base;
    tnt_status_t status;

    /* Empty runs are skipped identically on every rank (same plan). */
    if (count == 0) {
        return TNT_OK;
    }
    base = fusion_run_contiguous(fusion, first, n);
    if (base != NULL) {
        /* One scale for the whole run (the usual case: one weight per rank
         * and step) rides on the collective's own copy; mixed scales are
         * applied tensor by tensor first. */
        double run_scale = 1.0;
        int uniform = 1, seen = 0;
        for (size_t i = first; i < first + n; i++) {
            const struct fusion_tensor *t = &fusion->tensors[i];
            if (t->count == 0) {
                continue;
            }
            if (!seen) {
                run_scale = t->scale;
                seen = 1;
            } else if (t->scale != run_scale) {
                uniform = 0;
            }
        }
        if (!uniform) {
            for (size_t i = first; i < first + n; i++) {
                struct fusion_tensor *t = &fusion->tensors[i];
                if (t->count > 0 && t->scale != 1.0) {
                    tnt_reduce_scale(dtype, t->data, t->count, t->scale);
                }
            }
            run_scale = 1.0;
        }
        if (n > 1) {
            fusion->inplace_buckets++;
        }
        return tnt_coll_allreduce_scaled(comm, base, base, count, dtype, fusion->op, run_scale);
    }
    if (staging == NULL) {
        /* A single tensor that was never marked on this rank (the step
         * fails): contribute zeros from the shared fill buffer. Runs execute
         * one at a time on this thread, so re-zeroing it here is safe. */
        memset(fusion->fill, 0, count * elem);
        return tnt_coll_allreduce(comm, fusion->fill, fusion->fill, count, dtype, fusion->op);
    }
    fusion->copied_buckets++;
    for (size_t i = first; i < first + n; i++) {
        struct fusion_tensor *t = &fusion->tensors[i];
        if (t->count == 0) {
            continue;
        }
        if (t->data != NULL) {
            tnt_reduce_copy_scaled(dtype, staging + t->offset_bytes, t->data, t->count, t->scale);
        } else {
            memset(staging + t->offset_bytes, 0, t->count * elem);
        }
    }
    status = tnt_coll_allreduce(comm, staging, staging, count, dtype, fusion->op);
    if (status != TNT_OK) {
        return status;
    }
    for (size_t i = first; i < first + n; i++) {
        struct fusion_tensor *t = &fusion->tensors[i];
        if (t->data != NULL && t->count > 0) {
            memcpy(t->data, staging + t->offset_bytes, t->count * elem);
        }
    }
    return TNT_OK;
}

/* A compressed float32 bucket (see the top of the file). The per-rank
 * factor (the tensor's scale, times 1/size for an average) is applied in
 * float32 before the one rounding to 16 bits, so every partial sum is a
 * weighted average of gradients rather than a sum of them: a float16 sum
 * cannot overflow where the gradients themselves fit. Runs on the progress
 * thread. */
static tnt_status_t fusion_reduce_compressed(tnt_comm_t *comm, struct tnt_fusion *fusion,
                                             struct fusion_bucket *bucket)
{
    const tnt_dtype_t wire = fusion->wire_dtype;
    const size_t wire_elem = tnt_dtype_size(wire);
    const double pre = fusion->op == TNT_AVG ? 1.0 / (double)comm->size : 1.0;
    const size_t end = bucket->first_tensor + bucket->num_tensors;
    tnt_status_t status;

    if (bucket->count == 0) {
        return TNT_OK;
    }
    fusion->compressed_buckets++;
    for (size_t i = bucket->first_tensor; i < end; i++) {
        struct fusion_tensor *t = &fusion->tensors[i];
        unsigned char *slot = bucket->wire + t->offset_bytes / sizeof(float) * wire_elem;
        if (t->count == 0) {
            continue;
        }
        if (t->data != NULL) {
            tnt_reduce_narrow_scaled(wire, t->data, slot, t->count, t->scale * pre);
        } else {
            memset(slot, 0, t->count * wire_elem); /* never marked: the step fails */
        }
    }
    status = tnt_coll_allreduce_narrow(comm, bucket->wire, bucket->count, wire, TNT_SUM);
    if (status != TNT_OK) {
        return status;
    }
    for (size_t i = bucket->first_tensor; i < end; i++) {
        struct fusion_tensor *t = &fusion->tensors[i];
        if (t->data != NULL && t->count > 0) {
            tnt_reduce_widen(wire, bucket->wire + t->offset_bytes / sizeof(float) * wire_elem,
                             t->data, t->count);
        }
    }
    return TNT_OK;
}

/* Runs on the progress thread (see the top of the file). */
static tnt_status_t fusion_bucket_execute(tnt_comm_t *comm, struct tnt_request *req)
{
    struct fusion_bucket *bucket = req->args.user;
    struct tnt_fusion *fusion = bucket->fusion;
    tnt_status_t status;

    const uint64_t start_ns = tnt_tl_enabled() ? tnt_time_ns() : 0;
    tnt_doctor_note_fusion(comm->doctor, fusion->step, (uint32_t)(bucket - fusion->buckets));
    if (bucket->wire != NULL) {
        return fusion_reduce_compressed(comm, fusion, bucket);
    }
    status = fusion_reduce_run(comm, fusion, bucket->dtype, bucket->first_tensor,
                               bucket->num_staged, bucket->staged_count, bucket->staging);
    if (status == TNT_OK && bucket->split) {
        const size_t last = bucket->first_tensor + bucket->num_tensors - 1;
        status = fusion_reduce_run(comm, fusion, bucket->dtype, last, 1,
                                   fusion->tensors[last].count, NULL);
    }
    if (start_ns != 0 && tnt_tl_enabled()) {
        /* The bucket wraps its collectives on the lane that ran them. */
        tnt_tl_event_t ev = { .start_ns = start_ns,
                              .end_ns = tnt_time_ns(),
                              .posted_ns = req->posted_ns,
                              .bytes = (uint64_t)bucket->count * tnt_dtype_size(bucket->dtype),
                              .number = (uint64_t)(bucket - fusion->buckets),
                              .first = (uint32_t)bucket->first_tensor,
                              .count = (uint32_t)bucket->num_tensors,
                              .comm = comm->tl_comm };
        atomic_init(&ev.kind, TNT_TL_BUCKET);
        tnt_tl_add(&ev);
    }
    return status;
}

/* The step check: a MAX of one flag, which costs O(log nodes) latencies
 * (one element, so recursive doubling across nodes); only when some rank
 * was incomplete, which every rank then knows alike, is the per-rank byte
 * gathered to name them. */
static tnt_status_t fusion_check_execute(tnt_comm_t *comm, struct tnt_request *req)
{
    struct tnt_fusion *fusion = req->args.user;
    tnt_status_t status;

    fusion->any_incomplete = fusion->my_incomplete;
    status = tnt_coll_allreduce(comm, &fusion->any_incomplete, &fusion->any_incomplete, 1,
                                TNT_INT32, TNT_MAX);
    if (status != TNT_OK) {
        return status;
    }
    if (fusion->any_incomplete == 0) {
        return TNT_OK; /* fusion->incomplete is not looked at */
    }
    return tnt_coll_allgather(comm, &fusion->my_incomplete, fusion->incomplete, 1);
}

/* ------------------------------------------------------------------------ */
/* Training-thread side                                                      */
/* ------------------------------------------------------------------------ */

/* Called with fusion->lock held. Posts every full bucket from next_post on,
 * in bucket order, and the step check once the last bucket is out. */
static tnt_status_t fusion_post_ready(struct tnt_fusion *fusion)
{
    tnt_status_t status;

    while (fusion->next_post < fusion->num_buckets) {
        struct fusion_bucket *bucket = &fusion->buckets[fusion->next_post];
        if (bucket->marked < bucket->num_tensors) {
            return TNT_OK;
        }
        status = tnt_progress_post(fusion->comm, &bucket->req);
        if (status != TNT_OK) {
            fusion->broken = 1; /* peers will miss this collective */
            return status;
        }
        bucket->posted = 1;
        fusion->next_post++;
    }
    if (!fusion->check_posted) {
        status = tnt_progress_post(fusion->comm, &fusion->check_req);
        if (status != TNT_OK) {
            fusion->broken = 1;
            return status;
        }
        fusion->check_posted = 1;
    }
    return TNT_OK;
}

static tnt_status_t fusion_broken_error(const struct tnt_fusion *fusion, const char *fn)
{
    return tnt_error_raise(TNT_ERR_PEER_FAILED,
                           "%s: this fusion engine stopped at step %llu because an allreduce of "
                           "it failed or could not be posted; destroy it and restart the job",
                           fn, (unsigned long long)fusion->step);
}

TNT_API tnt_status_t tnt_fusion_mark_ready(tnt_fusion_t *fusion, size_t index, void *data,
                                           double scale)
{
    tnt_status_t status;

    if (fusion == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_fusion_mark_ready: fusion is NULL");
    }
    pthread_mutex_lock(&fusion->lock);
    if (fusion->broken) {
        status = fusion_broken_error(fusion, "tnt_fusion_mark_ready");
        goto out_unlock;
    }
    if (index >= fusion->num_tensors) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "tnt_fusion_mark_ready: tensor index %zu out of range; the engine "
                                 "has %zu tensors (0 .. %zu)",
                                 index, fusion->num_tensors,
                                 fusion->num_tensors ? fusion->num_tensors - 1 : 0);
        goto out_unlock;
    }
    struct fusion_tensor *t = &fusion->tensors[index];
    struct fusion_bucket *bucket = &fusion->buckets[t->bucket];
    if (t->data != NULL) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "tnt_fusion_mark_ready: tensor %zu was already marked ready in "
                                 "step %llu; call tnt_fusion_wait before marking it again",
                                 index, (unsigned long long)fusion->step);
        goto out_unlock;
    }
    if (data == NULL && t->count > 0) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "tnt_fusion_mark_ready: data of tensor %zu (%zu elements) is "
                                 "NULL",
                                 index, t->count);
        goto out_unlock;
    }
    if (!isfinite(scale)) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "tnt_fusion_mark_ready: scale %g of tensor %zu is not finite",
                                 scale, index);
        goto out_unlock;
    }

    /* The data is scaled and moved by the progress thread once the bucket
     * is complete. A zero-count tensor may pass NULL; any non-NULL marker
     * records it (it is never dereferenced). */
    t->data = data != NULL ? data : (void *)fusion;
    t->scale = scale;
    if (fusion->num_marked++ == 0) {
        /* The step's buckets follow each other within a backward pass: the
         * progress thread polls for the next one a little longer. */
        tnt_progress_hint(fusion->comm, 1);
    }
    bucket->marked++;
    status = TNT_OK;
    if (bucket->marked == bucket->num_tensors) {
        status = fusion_post_ready(fusion);
    }
out_unlock:
    pthread_mutex_unlock(&fusion->lock);
    return status;
}

/* Writes "3, 7, 12" (at most TNT_FUSION_LIST_MAX entries, then ", ... (N in
 * all)") of the indices i < n for which pick(ctx, i) holds. */
static void fusion_format_list(char *buf, size_t size, size_t n,
                               int (*pick)(const void *ctx, size_t i), const void *ctx)
{
    size_t used = 0, listed = 0, total = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!pick(ctx, i)) {
            continue;
        }
        total++;
        if (listed < TNT_FUSION_LIST_MAX && used < size) {
            int w = snprintf(buf + used, size - used, "%s%zu", listed ? ", " : "", i);
            used += w > 0 ? (size_t)w : 0;
            listed++;
        }
    }
    if (total > listed && used < size) {
        snprintf(buf + used, size - used, ", ... (%zu in all)", total);
    }
}

static int fusion_pick_unmarked(const void *ctx, size_t i)
{
    const struct tnt_fusion *fusion = ctx;
    return fusion->tensors[i].data == NULL;
}

static int fusion_pick_incomplete(const void *ctx, size_t i)
{
    const struct tnt_fusion *fusion = ctx;
    return fusion->incomplete[i] != 0;
}

/* Called with fusion->lock held, at the end of a step in which some tensors
 * were never marked: makes the rest of the step's collectives happen anyway
 * (zeros in place of the missing data) so that peers do not hang. */
static tnt_status_t fusion_post_fill_in(struct tnt_fusion *fusion)
{
    if (fusion->fill == NULL && fusion->max_single_bytes > 0) {
        /* Error path only, never in a good step. */
        fusion->fill = malloc(fusion->max_single_bytes);
        if (fusion->fill == NULL) {
            fusion->broken = 1;
            return tnt_error_raise(TNT_ERR_NO_MEMORY,
                                   "fusion step %llu: no memory (%zu bytes) to stand in for the "
                                   "tensors that were never marked ready",
                                   (unsigned long long)fusion->step, fusion->max_single_bytes);
        }
    }
    /* Every remaining bucket counts as full for this step only (reset in
     * wait), so fusion_post_ready posts them all, in order; the progress
     * thread puts zeros where a tensor's data is missing. */
    for (size_t b = fusion->next_post; b < fusion->num_buckets; b++) {
        fusion->buckets[b].marked = fusion->buckets[b].num_tensors;
    }
    fusion->my_incomplete = 1;
    return fusion_post_ready(fusion);
}

static void fusion_reset_step(struct tnt_fusion *fusion)
{
    for (size_t i = 0; i < fusion->num_tensors; i++) {
        fusion->tensors[i].data = NULL;
    }
    for (size_t b = 0; b < fusion->num_buckets; b++) {
        fusion->buckets[b].marked = 0;
        fusion->buckets[b].posted = 0;
    }
    fusion->next_post = 0;
    fusion->num_marked = 0;
    fusion->check_posted = 0;
    fusion->my_incomplete = 0;
    fusion->step++;
    tnt_progress_hint(fusion->comm, 0);
}

/* Waits for one posted request. Returns its status; marks the engine broken
 * when the request may still be running (its memory must then stay). */
static tnt_status_t fusion_wait_request(struct tnt_fusion *fusion, struct tnt_request *req)
{
    tnt_status_t status = tnt_progress_wait(fusion->comm, req);
    if (atomic_load_explicit(&req->status, memory_order_acquire) == TNT_IN_PROGRESS) {
        fusion->broken = 1;
    }
    return status;
}

/* The body of wait (lock held). report_missing: raise the error about
 * unmarked tensors (wait) or stay quiet (destroy). */
static tnt_status_t fusion_finish_step(struct tnt_fusion *fusion, int report_missing)
{
    tnt_status_t status = TNT_OK;
    tnt_status_t first_error = TNT_OK;
    char first_message[1024] = "";
    int first_printed = 0;
    char list[256];
    const size_t missing = fusion->num_tensors - fusion->num_marked;

    if (fusion->broken) {
        return fusion_broken_error(fusion, "tnt_fusion_wait");
    }
    if (missing > 0) {
        fusion_format_list(list, sizeof(list), fusion->num_tensors, fusion_pick_unmarked, fusion);
        status = fusion_post_fill_in(fusion);
    } else {
        /* Only reachable with zero tensors: the check has not gone out yet. */
        status = fusion_post_ready(fusion);
    }
    if (status != TNT_OK) {
        /* Nothing is waited for: posted requests may still run. */
        fusion->broken = 1;
        return status;
    }

    for (size_t b = 0; b < fusion->num_buckets; b++) {
        if (!fusion->buckets[b].posted) {
            continue;
        }
        status = fusion_wait_request(fusion, &fusion->buckets[b].req);
        if (status != TNT_OK && first_error == TNT_OK) {
            first_error = status;
            snprintf(first_message, sizeof(first_message), "%s", tnt_last_error());
            first_printed = tnt_error_printed();
        }
    }
    status = fusion_wait_request(fusion, &fusion->check_req);
    if (status != TNT_OK && first_error == TNT_OK) {
        first_error = status;
        snprintf(first_message, sizeof(first_message), "%s", tnt_last_error());
        first_printed = tnt_error_printed();
    }
    if (fusion->broken) {
        tnt_error_restore(first_message, first_printed);
        return first_error;
    }

    if (first_error != TNT_OK) {
        /* A collective failed: its own message (naming the peer) stands. */
        tnt_error_restore(first_message, first_printed);
        status = first_error;
    } else if (missing > 0) {
        status = report_missing
                     ? tnt_error_raise(TNT_ERR_INVALID_ARG,
                                       "fusion step %llu: tensor(s) %s of %zu were never marked "
                                       "ready; zeros were reduced in their place so no rank "
                                       "hangs, but this step's results are wrong on every rank. "
                                       "Call tnt_fusion_mark_ready for every tensor before "
                                       "tnt_fusion_wait",
                                       (unsigned long long)fusion->step, list, fusion->num_tensors)
                     : TNT_ERR_INVALID_ARG;
    } else {
        if (fusion->any_incomplete != 0) {
            fusion_format_list(list, sizeof(list), (size_t)fusion->comm->size,
                               fusion_pick_incomplete, fusion);
            status = tnt_error_raise(TNT_ERR_MISMATCH,
                                     "fusion step %llu: rank(s) %s did not mark every tensor "
                                     "ready, so this step's reduced gradients are incomplete on "
                                     "every rank (see the error of those ranks)",
                                     (unsigned long long)fusion->step, list);
        }
    }
    fusion_reset_step(fusion);
    return status;
}

TNT_API tnt_status_t tnt_fusion_wait(tnt_fusion_t *fusion)
{
    tnt_status_t status;

    if (fusion == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_fusion_wait: fusion is NULL");
    }
    pthread_mutex_lock(&fusion->lock);
    status = fusion_finish_step(fusion, 1);
    pthread_mutex_unlock(&fusion->lock);
    return status;
}

TNT_API size_t tnt_fusion_num_buckets(const tnt_fusion_t *fusion)
{
    return fusion != NULL ? fusion->num_buckets : 0;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */
/* ------------------------------------------------------------------------ */

static void fusion_free(struct tnt_fusion *fusion)
{
    free(fusion->incomplete);
    free(fusion->fill);
    free(fusion->arena);
    free(fusion->buckets);
    free(fusion->tensors);
    free(fusion);
}

/* The local part of create: checks the arguments, plans, allocates and lays
 * out everything. No communication. On success *fusion_p and *mine are set;
 * on failure the error is raised and nothing is left allocated. */
static tnt_status_t fusion_build(tnt_comm_t *comm, const tnt_tensor_desc_t *tensors,
                                 size_t num_tensors, size_t threshold_bytes, tnt_op_t op,
                                 tnt_compression_t compression, tnt_fusion_summary_t *mine,
                                 struct tnt_fusion **fusion_p)
{
    struct tnt_fusion *fusion;
    size_t *bucket_of = NULL;
    tnt_status_t status;

    if ((unsigned)op >= (unsigned)TNT_OP_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_fusion_create: invalid op %d; use TNT_SUM .. TNT_AVG", (int)op);
    }
    if ((unsigned)compression >= (unsigned)TNT_COMPRESSION_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_fusion_create_compressed: invalid compression %d; use "
                               "TNT_COMPRESSION_NONE, TNT_COMPRESSION_FP16 or TNT_COMPRESSION_BF16",
                               (int)compression);
    }
    if (compression != TNT_COMPRESSION_NONE && op != TNT_SUM && op != TNT_AVG) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_fusion_create_compressed: compression applies to TNT_SUM and "
                               "TNT_AVG only (op %d); use TNT_COMPRESSION_NONE for other ops",
                               (int)op);
    }
    status = tnt_fusion_plan_check(tensors, num_tensors);
    if (status != TNT_OK) {
        return status;
    }

    fusion = calloc(1, sizeof(*fusion));
    if (fusion == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_fusion_create: out of memory");
        goto err;
    }
    fusion->comm = comm;
    fusion->op = op;
    fusion->compression = compression;
    fusion->wire_dtype = compression == TNT_COMPRESSION_FP16 ? TNT_FLOAT16 : TNT_BFLOAT16;
    fusion->threshold = threshold_bytes;
    fusion->num_tensors = num_tensors;
    bucket_of = malloc((num_tensors ? num_tensors : 1) * sizeof(*bucket_of));
    fusion->tensors = calloc(num_tensors ? num_tensors : 1, sizeof(*fusion->tensors));
    fusion->incomplete = calloc((size_t)comm->size, 1);
    if (bucket_of == NULL || fusion->tensors == NULL || fusion->incomplete == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY,
                                 "tnt_fusion_create: out of memory for %zu tensors", num_tensors);
        goto err_free;
    }
    status =
        tnt_fusion_plan(tensors, num_tensors, threshold_bytes, bucket_of, &fusion->num_buckets);
    if (status != TNT_OK) {
        goto err_free;
    }
    fusion->buckets =
        calloc(fusion->num_buckets ? fusion->num_buckets : 1, sizeof(*fusion->buckets));
    if (fusion->buckets == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY,
                                 "tnt_fusion_create: out of memory for %zu "
                                 "buckets",
                                 fusion->num_buckets);
        goto err_free;
    }

    /* Lay out the buckets and the staging arena. */
    uint64_t total_bytes = 0;
    size_t arena_bytes = 0;
    for (size_t i = 0; i < num_tensors; i++) {
        struct fusion_tensor *t = &fusion->tensors[i];
        struct fusion_bucket *bucket = &fusion->buckets[bucket_of[i]];
        const size_t bytes = tensors[i].count * tnt_dtype_size(tensors[i].dtype);

        t->count = tensors[i].count;
        t->dtype = tensors[i].dtype;
        t->bucket = bucket_of[i];
        if (bucket->num_tensors == 0) {
            bucket->first_tensor = i;
            bucket->dtype = t->dtype;
        }
        t->offset_bytes = bucket->count * tnt_dtype_size(t->dtype);
        bucket->num_tensors++;
        bucket->count += t->count;
        total_bytes += bytes;
    }
    for (size_t b = 0; b < fusion->num_buckets; b++) {
        struct fusion_bucket *bucket = &fusion->buckets[b];
        const size_t elem = tnt_dtype_size(bucket->dtype);
        const struct fusion_tensor *last =
            &fusion->tensors[bucket->first_tensor + bucket->num_tensors - 1];
        if (compression != TNT_COMPRESSION_NONE && bucket->dtype == TNT_FLOAT32) {
            /* Compressed: the whole bucket goes through its 16-bit slot. */
            const size_t wire_bytes = bucket->count * tnt_dtype_size(fusion->wire_dtype);
            bucket->compressed = 1;
            bucket->num_staged = bucket->num_tensors;
            bucket->staged_count = bucket->count;
            if (wire_bytes > SIZE_MAX - arena_bytes - FUSION_ALIGN) {
                status =
                    tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_fusion_create: the staging "
                                                       "buffers do not fit in the address space");
                goto err_free;
            }
            bucket->staging_offset = arena_bytes;
            arena_bytes += (wire_bytes + FUSION_ALIGN - 1) / FUSION_ALIGN * FUSION_ALIGN;
            continue;
        }
        /* A bucket closed by a tensor that reaches the threshold on its own
         * (the greedy plan puts such a tensor last): reduce that tensor in
         * place as its own collective instead of copying it twice. It costs
         * one more collective per such bucket and saves copying the largest
         * tensors, which on one node costs far more (docs/tuning.md). */
        bucket->split = bucket->num_tensors > 1 && last->count * elem >= threshold_bytes;
        bucket->num_staged = bucket->num_tensors - (bucket->split ? 1 : 0);
        bucket->staged_count = bucket->count - (bucket->split ? last->count : 0);
        if (bucket->split && last->count * elem > fusion->max_single_bytes) {
            fusion->max_single_bytes = last->count * elem;
        }
        const size_t bytes = bucket->staged_count * elem;
        if (bucket->num_staged > 1) {
            if (bytes > SIZE_MAX - arena_bytes - FUSION_ALIGN) {
                status =
                    tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_fusion_create: the staging "
                                                       "buffers do not fit in the address space");
                goto err_free;
            }
            bucket->staging_offset = arena_bytes;
            arena_bytes += (bytes + FUSION_ALIGN - 1) / FUSION_ALIGN * FUSION_ALIGN;
        } else if (bytes > fusion->max_single_bytes) {
            fusion->max_single_bytes = bytes;
        }
    }
    if (arena_bytes > 0) {
        if (posix_memalign((void **)&fusion->arena, FUSION_ALIGN, arena_bytes) != 0) {
            fusion->arena = NULL;
            status = tnt_error_raise(TNT_ERR_NO_MEMORY,
                                     "tnt_fusion_create: no memory for %zu bytes of fusion "
                                     "staging buffers; lower the threshold "
                                     "(TNT_FUSION_THRESHOLD_KB) or use 0 for no staging",
                                     arena_bytes);
            goto err_free;
        }
        /* Touch every page now, so the first step does not pay page faults. */
        memset(fusion->arena, 0, arena_bytes);
    }
    for (size_t b = 0; b < fusion->num_buckets; b++) {
        struct fusion_bucket *bucket = &fusion->buckets[b];
        /* A run of zero-count tensors has no slot (and maybe no arena). */
        if (bucket->compressed) {
            bucket->wire = bucket->count > 0 ? fusion->arena + bucket->staging_offset : NULL;
        } else {
            bucket->staging = bucket->num_staged > 1 && fusion->arena != NULL
                                  ? fusion->arena + bucket->staging_offset
                                  : NULL;
        }
        bucket->fusion = fusion;
        bucket->req.execute = fusion_bucket_execute;
        bucket->req.heap_allocated = 0;
        bucket->req.args.user = bucket;
        atomic_init(&bucket->req.status, TNT_OK);
    }
    fusion->check_req.execute = fusion_check_execute;
    fusion->check_req.heap_allocated = 0;
    fusion->check_req.args.user = fusion;
    atomic_init(&fusion->check_req.status, TNT_OK);

    if (pthread_mutex_init(&fusion->lock, NULL) != 0) {
        status = tnt_error_raise(TNT_ERR_SYSTEM, "tnt_fusion_create: pthread_mutex_init failed");
        goto err_free;
    }
    const uint64_t digest =
        tnt_fusion_plan_digest(tensors, num_tensors, bucket_of, threshold_bytes, op, compression);
    free(bucket_of);
    tnt_log_debug("fusion engine: %zu tensors, %llu bytes, threshold %zu bytes, %zu buckets, "
                  "%zu bytes of staging, compression %s",
                  num_tensors, (unsigned long long)total_bytes, threshold_bytes,
                  fusion->num_buckets, arena_bytes, tnt_fusion_compression_name(compression));
    memset(mine, 0, sizeof(*mine));
    mine->digest = digest;
    mine->num_tensors = num_tensors;
    mine->num_buckets = fusion->num_buckets;
    mine->threshold = threshold_bytes;
    mine->total_bytes = total_bytes;
    mine->op = (uint32_t)op;
    mine->compression = (uint32_t)compression;
    *fusion_p = fusion;
    return TNT_OK;

err_free:
    free(bucket_of);
    fusion_free(fusion);
err:
    return status;
}

TNT_API int tnt_fusion_tune_requested(const tnt_comm_t *comm)
{
    return comm != NULL && comm->settings->fusion_threshold_bytes == TNT_SETTINGS_TUNE;
}

TNT_API tnt_status_t tnt_fusion_create(tnt_comm_t *comm, const tnt_tensor_desc_t *tensors,
                                       size_t num_tensors, size_t threshold_bytes, tnt_op_t op,
                                       tnt_fusion_t **fusion_p)
{
    return tnt_fusion_create_compressed(comm, tensors, num_tensors, threshold_bytes, op,
                                        TNT_COMPRESSION_NONE, fusion_p);
}

TNT_API tnt_status_t tnt_fusion_create_compressed(tnt_comm_t *comm,
                                                  const tnt_tensor_desc_t *tensors,
                                                  size_t num_tensors, size_t threshold_bytes,
                                                  tnt_op_t op, tnt_compression_t compression,
                                                  tnt_fusion_t **fusion_p)
{
    struct tnt_fusion *fusion = NULL;
    tnt_fusion_summary_t mine;
    tnt_status_t local, status;
    char local_message[1024] = "";
    int local_printed = 0;

    if (comm == NULL) {
        return tnt_error_raise(TNT_ERR_NOT_INITIALIZED,
                               "tnt_fusion_create: comm is NULL; call tnt_init first");
    }
    if (threshold_bytes == TNT_FUSION_THRESHOLD_AUTO) {
        /* TNT_FUSION_THRESHOLD_KB=auto: the engine does not time steps
         * itself; it takes the default, and tuning callers ask
         * tnt_fusion_tune_requested and pass each candidate explicitly. */
        threshold_bytes = comm->settings->fusion_threshold_bytes == TNT_SETTINGS_TUNE
                              ? TNT_FUSION_THRESHOLD_DEFAULT_BYTES
                              : comm->settings->fusion_threshold_bytes;
    }
    if (fusion_p == NULL) {
        local = tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_fusion_create: fusion_p is NULL");
    } else {
        local = fusion_build(comm, tensors, num_tensors, threshold_bytes, op, compression, &mine,
                             &fusion);
    }
    if (local != TNT_OK) {
        /* Still take part in the comparison, marked as failed, so that the
         * other ranks fail at once (naming this rank) instead of waiting for
         * it until TNT_TIMEOUT. This rank keeps its own, more precise error. */
        snprintf(local_message, sizeof(local_message), "%s", tnt_last_error());
        local_printed = tnt_error_printed();
        memset(&mine, 0, sizeof(mine));
        mine.num_tensors = num_tensors;
        mine.threshold = threshold_bytes;
        mine.op = (uint32_t)op;
        mine.compression = (uint32_t)compression;
        mine.failed = 1;
    }
    status = tnt_fusion_plan_agree(comm, &mine);
    if (local != TNT_OK) {
        tnt_error_restore(local_message, local_printed);
        return local;
    }
    if (status != TNT_OK) {
        pthread_mutex_destroy(&fusion->lock);
        fusion_free(fusion);
        return status;
    }
    *fusion_p = fusion;
    return TNT_OK;
}

TNT_API void tnt_fusion_destroy(tnt_fusion_t *fusion)
{
    if (fusion == NULL) {
        return;
    }
    pthread_mutex_lock(&fusion->lock);
    /* Destroyed in the middle of a step (an exception between mark_ready and
     * wait): finish the step like wait would, so that peers still find this
     * rank's collectives (and learn from the step check that it is
     * incomplete) instead of waiting for them until TNT_TIMEOUT. */
    if (!fusion->broken && fusion->num_marked > 0) {
        (void)fusion_finish_step(fusion, 0);
    }
    const int broken = fusion->broken;
    pthread_mutex_unlock(&fusion->lock);
    /* Read after every request was waited for (acquire), so the progress
     * thread's last increments are visible. */
    tnt_log_debug("fusion engine destroyed after %llu steps: fused buckets copied through "
                  "staging %llu times, reduced in place (contiguous) %llu times, sent "
                  "compressed %llu times",
                  (unsigned long long)fusion->step, (unsigned long long)fusion->copied_buckets,
                  (unsigned long long)fusion->inplace_buckets,
                  (unsigned long long)fusion->compressed_buckets);
    if (broken) {
        /* A request may still be queued or running on the progress thread
         * and point into this memory: leaking it is the only safe choice. */
        tnt_log_warn("fusion engine destroyed while one of its allreduces may still be running; "
                     "its memory is not freed");
        return;
    }
    pthread_mutex_destroy(&fusion->lock);
    fusion_free(fusion);
}
