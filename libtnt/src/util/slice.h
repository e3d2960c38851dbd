/*
 * The one slice rule: part r of p parts of a total of B items is B/p items,
 * plus one more when r < B % p, and the parts follow each other in order.
 * Dataset shards (shard/), the shared-memory reduce-scatter (transport/shm)
 * and the hierarchical multi-node allreduce (coll/multinode), which works
 * out other nodes' slices itself, all use this function, so they always
 * pair the same elements.
 */
#ifndef TNT_UTIL_SLICE_H
#define TNT_UTIL_SLICE_H

#include <stddef.h>

/* Offset and length of part `part` (0 <= part < parts) of `total` items.
 * part * (total / parts) <= total and min(part, total % parts) < parts, so
 * nothing overflows and offset + count <= total. */
static inline void tnt_slice(size_t total, size_t part, size_t parts, size_t *offset_p,
                             size_t *count_p)
{
    const size_t base = total / parts;
    const size_t extra = total % parts;

    *offset_p = part * base + (part < extra ? part : extra);
    *count_p = base + (part < extra ? 1 : 0);
}

#endif
