/*
 * Internal interface of the fusion engine (plan.c, plan_agree.c, engine.c).
 * The public functions are declared in tnt/tnt.h.
 */
#ifndef TNT_FUSION_FUSION_H
#define TNT_FUSION_FUSION_H

#include <tnt/tnt.h>
#include <stddef.h>
#include <stdint.h>

/* Messages list at most this many ranks or tensors, then "... (N in all)". */
#define TNT_FUSION_LIST_MAX 16

/* Checks a tensor list (pointer, dtypes, byte sizes that fit in size_t);
 * raises TNT_ERR_INVALID_ARG naming the first bad tensor. */
tnt_status_t tnt_fusion_plan_check(const tnt_tensor_desc_t *tensors, size_t num_tensors);

/* What tnt_fusion_create compares across ranks: a digest of the whole plan
 * plus the headline numbers for the message. Fixed-width fields only, since
 * the struct is gathered as bytes. */
typedef struct {
    uint64_t digest;
    uint64_t num_tensors;
    uint64_t num_buckets;
    uint64_t threshold;
    uint64_t total_bytes;
    uint32_t op;
    uint32_t failed; /* 1: this rank could not build its engine */
    uint32_t compression;
    uint32_t reserved; /* zero: no padding bytes in what is compared */
} tnt_fusion_summary_t;

/* "none", "fp16", "bf16" (the names tarantella's Python API uses). */
const char *tnt_fusion_compression_name(tnt_compression_t compression);

/* FNV-1a over the threshold, the op, the compression and every tensor's
 * count, dtype and bucket: equal on two ranks exactly when their plans are
 * (barring a collision). */
uint64_t tnt_fusion_plan_digest(const tnt_tensor_desc_t *tensors, size_t num_tensors,
                                const size_t *bucket_of_tensor, size_t threshold_bytes,
                                tnt_op_t op, tnt_compression_t compression);

/* Collective: gathers every rank's summary and compares it with rank 0's.
 * All ranks get the same answer (they all see the same summaries): TNT_OK,
 * or TNT_ERR_MISMATCH naming the ranks that differ or could not build their
 * engine (failed), logged by rank 0 and by those ranks. */
tnt_status_t tnt_fusion_plan_agree(tnt_comm_t *comm, const tnt_fusion_summary_t *mine);

#endif
