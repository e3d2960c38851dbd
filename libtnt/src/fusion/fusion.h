/*
 * Internal interface of the fusion engine (plan.c, engine.c). The public
 * functions are declared in tnt/tnt.h.
 */
#ifndef TNT_FUSION_FUSION_H
#define TNT_FUSION_FUSION_H

#include <tnt/tnt.h>

/* Checks a tensor list (pointer, dtypes, byte sizes that fit in size_t);
 * raises TNT_ERR_INVALID_ARG naming the first bad tensor. */
tnt_status_t tnt_fusion_plan_check(const tnt_tensor_desc_t *tensors, size_t num_tensors);

/* The threshold that TNT_FUSION_THRESHOLD_AUTO stands for: TNT_FUSION_THRESHOLD_KB
 * (KiB, an integer >= 0) when set and valid, else
 * TNT_FUSION_THRESHOLD_DEFAULT_BYTES. A bad value gives one warning per
 * process that names the value and the default used instead. */
size_t tnt_fusion_threshold_from_env(void);

#endif
