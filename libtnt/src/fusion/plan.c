/*
 * Fusion planning: a pure function from (tensor list, threshold) to buckets.
 *
 * Rule (greedy, one pass, in the order gradients become ready): a tensor joins
 * the open bucket; the bucket closes as soon as its size reaches the
 * threshold, or before a tensor of another dtype joins it (one allreduce
 * reduces one dtype). The last bucket may be smaller than the threshold.
 * Threshold 0 therefore closes every bucket after one tensor, including
 * zero-count tensors. Being a pure function of its inputs, the plan is the
 * same on every rank that passes the same list; plan_agree.c checks that.
 */
#include "fusion/fusion.h"

#include "util/log.h"
#include "util/settings.h"

#include <stdint.h>
#include <stdlib.h>

/* Size of one tensor in bytes, or SIZE_MAX when count * element size does
 * not fit in size_t (the caller rejects that). */
static size_t fusion_tensor_bytes(const tnt_tensor_desc_t *tensor)
{
    const size_t elem = tnt_dtype_size(tensor->dtype);
    if (elem != 0 && tensor->count > SIZE_MAX / elem) {
        return SIZE_MAX;
    }
    return tensor->count * elem;
}

tnt_status_t tnt_fusion_plan_check(const tnt_tensor_desc_t *tensors, size_t num_tensors)
{
    if (num_tensors > 0 && tensors == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "fusion plan: tensors is NULL but num_tensors is %zu", num_tensors);
    }
    for (size_t i = 0; i < num_tensors; i++) {
        if ((unsigned)tensors[i].dtype >= (unsigned)TNT_DTYPE_LAST) {
            return tnt_error_raise(TNT_ERR_INVALID_ARG,
                                   "fusion plan: tensor %zu has invalid dtype %d; use one of "
                                   "TNT_FLOAT32 .. TNT_INT64",
                                   i, (int)tensors[i].dtype);
        }
        if (fusion_tensor_bytes(&tensors[i]) == SIZE_MAX) {
            return tnt_error_raise(TNT_ERR_INVALID_ARG,
                                   "fusion plan: tensor %zu has %zu elements, too many bytes "
                                   "for this machine's size_t",
                                   i, tensors[i].count);
        }
    }
    return TNT_OK;
}

TNT_API tnt_status_t tnt_fusion_plan(const tnt_tensor_desc_t *tensors, size_t num_tensors,
                                     size_t threshold_bytes, size_t *bucket_of_tensor,
                                     size_t *num_buckets_p)
{
    size_t num_buckets = 0;
    size_t open_bytes = 0; /* bytes in the open bucket */
    int open = 0;          /* whether a bucket is open */
    tnt_dtype_t open_dtype = TNT_FLOAT32;
    tnt_status_t status;

    if (num_buckets_p == NULL || (num_tensors > 0 && bucket_of_tensor == NULL)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_fusion_plan: bucket_of_tensor (%zu entries) and "
                               "num_buckets_p must not be NULL",
                               num_tensors);
    }
    status = tnt_fusion_plan_check(tensors, num_tensors);
    if (status != TNT_OK) {
        return status;
    }
    if (threshold_bytes == TNT_FUSION_THRESHOLD_AUTO) {
        /* The planner is a pure function that needs no communicator (callers
         * may plan before tnt_init), so it reads its one variable itself,
         * through the same parser and with the same error as tnt_init. */
        tnt_settings_t settings;
        tnt_settings_set_defaults(&settings);
        status = tnt_settings_parse(&settings, "TNT_FUSION_THRESHOLD_KB",
                                    getenv("TNT_FUSION_THRESHOLD_KB"));
        if (status != TNT_OK) {
            return status;
        }
        /* "auto" asks the caller that times steps (the Python reducer) to
         * tune; a plan on its own takes the default. */
        threshold_bytes = settings.fusion_threshold_bytes == TNT_SETTINGS_TUNE
                              ? TNT_FUSION_THRESHOLD_DEFAULT_BYTES
                              : settings.fusion_threshold_bytes;
    }

    for (size_t i = 0; i < num_tensors; i++) {
        const size_t bytes = fusion_tensor_bytes(&tensors[i]);

        if (open && tensors[i].dtype != open_dtype) {
            open = 0;
        }
        if (!open) {
            open = 1;
            open_bytes = 0;
            open_dtype = tensors[i].dtype;
            num_buckets++;
        }
        bucket_of_tensor[i] = num_buckets - 1;
        /* Saturating add: the sum of many tensors may exceed size_t. */
        open_bytes = bytes > SIZE_MAX - open_bytes ? SIZE_MAX : open_bytes + bytes;
        if (open_bytes >= threshold_bytes) {
            open = 0;
        }
    }
    *num_buckets_p = num_buckets;
    return TNT_OK;
}
