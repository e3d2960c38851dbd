/*
 * The bytes of one element, inline. tnt_dtype_size is exported, so a call
 * to it from inside the library goes through the PLT and is never inlined:
 * a small tnt_reduce asked it nine times, about 80 instructions a call.
 * The small rooted calls' path (core/api_composed.c, coll/composed.c,
 * tnt_shm_reduce) uses this one; the rest keep tnt_dtype_size, since
 * inlining it into the allreduce path measured 0.01-0.02 us slower at
 * 4-64 B with fewer instructions (docs/data/collective_set_2ranks_eager_instr.md).
 * The public function returns this one's answer.
 */
#ifndef TNT_UTIL_DTYPE_H
#define TNT_UTIL_DTYPE_H

#include <tnt/tnt.h>

#include <stddef.h>

/* 0 for anything that is not a dtype. */
static inline size_t tnt_dtype_bytes(tnt_dtype_t dtype)
{
    switch (dtype) {
    case TNT_FLOAT32:
        return 4;
    case TNT_FLOAT64:
        return 8;
    case TNT_FLOAT16:
        return 2;
    case TNT_BFLOAT16:
        return 2;
    case TNT_INT32:
        return 4;
    case TNT_INT64:
        return 8;
    case TNT_DTYPE_LAST:
        break;
    }
    return 0;
}

#endif
