/*
 * Chunk planning of the host-staged device path. Dependency-free on purpose:
 * it is compiled into libtnt (unit tests) and into libtnt_cuda.so (which
 * uses no libtnt symbol, see plugin.h).
 */
#include "gpu/gpu.h"

tnt_gpu_chunks_t tnt_gpu_chunks_plan(size_t count, size_t esize, size_t chunk_bytes)
{
    tnt_gpu_chunks_t plan = { .count = count, .chunk_elems = 1, .num_chunks = 0 };
    if (esize > 0 && chunk_bytes / esize > 0) {
        plan.chunk_elems = chunk_bytes / esize;
    }
    /* Written to avoid count + chunk_elems - 1 overflowing. */
    plan.num_chunks = count / plan.chunk_elems + (count % plan.chunk_elems != 0);
    return plan;
}

void tnt_gpu_chunk_at(const tnt_gpu_chunks_t *plan, size_t i, size_t *offset_p, size_t *count_p)
{
    size_t offset = i * plan->chunk_elems;
    size_t left = plan->count - offset;
    *offset_p = offset;
    *count_p = left < plan->chunk_elems ? left : plan->chunk_elems;
}
